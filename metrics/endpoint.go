package metrics

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Path is where the endpoint serves the series.
const Path = "/metrics"

// Endpoint is the HTTP listener of --metrics-listen.
type Endpoint struct {
	ln  net.Listener
	srv *http.Server
}

// Listen binds addr (host:port) and returns the endpoint that will serve src's series and lat's
// histograms (lat may be nil) once Serve runs. A bind failure is reported in memcached's words for its
// own listeners ("failed to listen on ...").
func Listen(addr string, src Source, lat *Latencies) (*Endpoint, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return nil, fmt.Errorf("failed to listen on metrics address %s: %w", addr, errno)
		}
		return nil, fmt.Errorf("failed to listen on metrics address %s: %w", addr, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(src, lat), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle(Path, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return &Endpoint{ln: ln, srv: &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second, // a client that never sends its headers does not hold a goroutine
	}}, nil
}

// Addr is the address the endpoint listens on.
func (e *Endpoint) Addr() net.Addr { return e.ln.Addr() }

// Serve serves until Close.
func (e *Endpoint) Serve() {
	_ = e.srv.Serve(e.ln) // ErrServerClosed after Close; nothing else ends it
}

// Close stops listening and closes every connection, a scrape in progress too.
func (e *Endpoint) Close() error {
	err := e.srv.Close()
	_ = e.ln.Close() // Serve may not have started
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
