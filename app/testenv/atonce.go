package testenv

import "sync"

// AtOnce runs each of fns in a goroutine of its own, all released at the
// same moment through a closed channel, and returns when every one has
// finished: how a concurrency test makes its calls race.
func AtOnce(fns ...func()) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Go(func() {
			<-start
			fn()
		})
	}
	close(start)
	wg.Wait()
}
