// 100 sequential GETs with Go's net/http client (Debian golang-go 1.19: the
// pre-1.27 behaviour, where closing an unread body discards the connection).
// Prints the elapsed milliseconds.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	url := flag.String("url", "", "URL to GET")
	n := flag.Int("n", 100, "requests")
	ca := flag.String("ca", "", "CA PEM for https")
	readall := flag.Bool("readall", false, "read each body to the end before Close")
	flag.Parse()
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 32, IdleConnTimeout: 90 * time.Second}
	if *ca != "" {
		pem, err := os.ReadFile(*ca)
		if err != nil {
			panic(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, ClientSessionCache: tls.NewLRUClientSessionCache(64)}
	}
	c := &http.Client{Transport: tr}
	start := time.Now()
	for i := 0; i < *n; i++ {
		resp, err := c.Get(*url)
		if err != nil {
			panic(err)
		}
		if resp.StatusCode != 200 {
			panic(resp.Status)
		}
		if *readall {
			io.Copy(io.Discard, resp.Body)
		}
		resp.Body.Close()
	}
	fmt.Printf("ms %.1f\n", float64(time.Since(start).Microseconds())/1000)
}
