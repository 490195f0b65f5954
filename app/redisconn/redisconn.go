// Package redisconn turns REDIS_URL into Redis clients, so that every part
// of Sekali that talks to Redis — Asynq's client, server, inspector and the
// queues UI, the job locks, /readyz — reaches the same server the same way:
// one redis-server (redis://, rediss://), or through Sentinel whichever
// server is the primary now (redis-sentinel://).
//
// The Sentinel form is Asynq's own (asynq.ParseRedisURI):
//
//	redis-sentinel://[[user]:password@]host1:port1,host2:port2,host3:port3[/]?master=mymaster[&db=N][&password=P]
//
// As in Asynq and go-redis, the user and password before the @ are the
// Sentinels' own. Two parameters go beyond Asynq's parser, which ignores
// them: db (the logical database on the primary, default 0) and password
// (the primary's and replicas' password, go-redis's name for it in
// ParseFailoverURL). Any other parameter is refused rather than ignored.
package redisconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// SentinelScheme is the URL scheme of a Redis reached through Sentinel.
const SentinelScheme = "redis-sentinel"

// Conn is a parsed REDIS_URL: either one server or a Sentinel-monitored
// primary. Its zero value is not usable; get one from Parse.
type Conn struct {
	single   *redis.Options
	failover *redis.FailoverOptions
}

// Parse reads a redis://, rediss:// or redis-sentinel:// URL. Its errors
// never repeat the URL, which may hold a password.
func Parse(rawURL string) (Conn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // url.Error repeats the URL; keep only the reason
			err = ue.Err
		}
		return Conn{}, fmt.Errorf("not a URL: %v", err)
	}
	switch u.Scheme {
	case "redis", "rediss":
		if u.Host == "" {
			return Conn{}, fmt.Errorf("not a %s://host:port/db URL: no host", u.Scheme)
		}
		opts, err := redis.ParseURL(rawURL)
		if err != nil {
			return Conn{}, err
		}
		return Conn{single: opts}, nil
	case SentinelScheme:
		opts, err := parseSentinel(u)
		if err != nil {
			return Conn{}, fmt.Errorf("%s URL: %w (want %s://[:password@]host1:port1,host2:port2/?master=name[&db=N])",
				SentinelScheme, err, SentinelScheme)
		}
		return Conn{failover: opts}, nil
	}
	return Conn{}, fmt.Errorf("scheme %q is not one of redis, rediss, %s", u.Scheme, SentinelScheme)
}

func parseSentinel(u *url.URL) (*redis.FailoverOptions, error) {
	opts := &redis.FailoverOptions{}
	if u.User != nil {
		opts.SentinelUsername = u.User.Username()
		opts.SentinelPassword, _ = u.User.Password()
	}
	if u.Host == "" {
		return nil, errors.New("no sentinel addresses")
	}
	for _, addr := range strings.Split(u.Host, ",") {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("sentinel address %q is not host:port", addr)
		}
		opts.SentinelAddrs = append(opts.SentinelAddrs, addr)
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("path %q: the database goes in ?db=N", u.Path)
	}
	q := u.Query()
	for k := range q {
		switch k {
		case "master", "db", "password":
		default:
			return nil, fmt.Errorf("unknown parameter %q", k)
		}
	}
	opts.MasterName = q.Get("master")
	if opts.MasterName == "" {
		return nil, errors.New("no ?master=name")
	}
	if s := q.Get("db"); s != "" {
		db, err := strconv.Atoi(s)
		if err != nil || db < 0 {
			return nil, fmt.Errorf("db %q is not a database number", s)
		}
		opts.DB = db
	}
	opts.Password = q.Get("password")
	return opts, nil
}

// Sentinel reports whether the connection goes through Sentinel.
func (c Conn) Sentinel() bool { return c.failover != nil }

// NewClient returns a new client: go-redis's failover client for a
// Sentinel URL — it asks the Sentinels for the primary on every new
// connection and drops its connections when they announce a new one — or
// a plain client otherwise. The caller closes it.
func (c Conn) NewClient() redis.UniversalClient {
	if c.failover != nil {
		opts := *c.failover
		opts.SentinelAddrs = append([]string(nil), opts.SentinelAddrs...)
		return redis.NewFailoverClient(&opts)
	}
	opts := *c.single
	return redis.NewClient(&opts)
}

// MakeRedisClient makes Conn an asynq.RedisConnOpt, for the parts of
// Asynq that build (and close) clients of their own, such as asynqmon.
func (c Conn) MakeRedisClient() any { return c.NewClient() }

// Redact returns rawURL with its passwords masked, for logs: the one
// before the @ and the password parameter of a Sentinel URL.
func Redact(rawURL string) string {
	if rawURL == "" {
		return ""
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparseable)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// LogTo sends go-redis's own messages to log instead of plain lines on
// stderr among the JSON ones; among them are the failover client's "new
// master" when the Sentinels announce a promotion. go-redis has one
// logger per process.
func LogTo(log *slog.Logger) { redis.SetLogger(printfLogger{log.With("component", "go-redis")}) }

type printfLogger struct{ log *slog.Logger }

func (l printfLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.InfoContext(ctx, fmt.Sprintf(format, v...))
}
