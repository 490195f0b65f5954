package views

import (
	"strconv"
	"time"
)

// ChartSeries are the stacks of the deliveries chart, bottom to top. Every
// refusal (bad signature, payload, size or type) is one series, "refused".
var ChartSeries = []string{"processed", "duplicate", "stale", "ignored", "unconfirmed", "conflict", "rejected", "error", "refused"}

// Chart is the deliveries-per-minute chart as SVG geometry: one bar per
// minute, stacked by series. It is computed here so the SVG needs no
// script and the page no chart library.
type Chart struct {
	Width, Height int
	Bars          []Bar
	YMax          int64
	Ticks         []Tick // y-axis lines
	Labels        []Tick // x-axis labels
	Empty         bool
}

// Bar is one minute.
type Bar struct {
	X, W     float64
	Minute   time.Time
	Total    int64
	Segments []Segment
}

// Segment is one series within a bar.
type Segment struct {
	Y, H   float64
	Series string
	N      int64
}

// Tick is a labelled position on an axis.
type Tick struct {
	Pos   float64
	Label string
}

// Chart geometry, in SVG user units.
const (
	chartWidth  = 720
	chartHeight = 200
	chartLeft   = 44 // room for the y labels
	chartBottom = 22 // room for the x labels
	chartTop    = 8
)

// NewChart lays out counts[minute][series] for the minutes from start,
// one bar each.
func NewChart(start time.Time, minutes int, counts map[time.Time]map[string]int64) Chart {
	c := Chart{Width: chartWidth, Height: chartHeight}
	var ymax int64
	for i := 0; i < minutes; i++ {
		var total int64
		for _, n := range counts[start.Add(time.Duration(i)*time.Minute)] {
			total += n
		}
		ymax = max(ymax, total)
	}
	c.Empty = ymax == 0
	c.YMax = niceCeiling(ymax)
	plotH := float64(chartHeight - chartBottom - chartTop)
	plotW := float64(chartWidth - chartLeft)
	slot := plotW / float64(minutes)
	for i := 0; i < minutes; i++ {
		m := start.Add(time.Duration(i) * time.Minute)
		b := Bar{X: chartLeft + float64(i)*slot + 1, W: max(slot-2, 1), Minute: m}
		y := float64(chartHeight - chartBottom)
		for _, s := range ChartSeries {
			n := counts[m][s]
			if n == 0 {
				continue
			}
			h := plotH * float64(n) / float64(c.YMax)
			y -= h
			b.Segments = append(b.Segments, Segment{Y: y, H: h, Series: s, N: n})
			b.Total += n
		}
		c.Bars = append(c.Bars, b)
		if i%10 == 0 {
			c.Labels = append(c.Labels, Tick{Pos: b.X, Label: m.UTC().Format("15:04")})
		}
	}
	for _, f := range []int64{0, 2, 4} {
		v := c.YMax * f / 4
		c.Ticks = append(c.Ticks, Tick{
			Pos:   float64(chartHeight-chartBottom) - plotH*float64(v)/float64(c.YMax),
			Label: strconv.FormatInt(v, 10),
		})
	}
	return c
}

// niceCeiling is the smallest 4 × (1, 2 or 5 × 10^k) that is at least n:
// an axis of four equal, round steps.
func niceCeiling(n int64) int64 {
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if 4*m*p >= n {
				return 4 * m * p
			}
		}
	}
}

// F formats an SVG coordinate.
func F(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// segmentsText lists a bar's counts by series: ", 3 processed, 12 duplicate".
func segmentsText(b Bar) string {
	var s string
	for _, seg := range b.Segments {
		s += ", " + strconv.FormatInt(seg.N, 10) + " " + seg.Series
	}
	return s
}
