// Go's httputil.ReverseProxy, the third proxy of bench/proxy.sh: one
// upstream URL, a Transport that keeps as many idle connections to it as
// nginx's `keepalive 64`, and the X-Forwarded-* headers nginx's
// bench/proxy/nginx.conf.in and moonhttp's http.proxy set. Run it with
// GOMAXPROCS=1 to compare one core against one moonhttp or nginx worker.
// Standard library only: it builds offline.
//
// Usage: proxy-go LISTEN_ADDR UPSTREAM_URL   (127.0.0.1:18184 http://127.0.0.1:18180)
package main

import (
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: proxy-go LISTEN_ADDR UPSTREAM_URL")
	}
	target, err := url.Parse(os.Args[2])
	if err != nil {
		log.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	director := rp.Director
	rp.Director = func(r *http.Request) {
		// X-Forwarded-For is added by ReverseProxy itself (the client's
		// address appended); Proto and Host as nginx's proxy_set_header.
		r.Header.Set("X-Forwarded-Proto", "http")
		r.Header.Set("X-Forwarded-Host", r.Host)
		director(r)
		r.Host = target.Host // nginx's default $proxy_host, http.proxy's default
	}
	rp.Transport = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	// Loopback only: the benchmark never listens on a real interface.
	log.Fatal(http.ListenAndServe(os.Args[1], rp))
}
