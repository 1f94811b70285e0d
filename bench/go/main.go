// The seed article's "standard ServeMux" variant: the 12 benchmark routes on
// http.ServeMux with http.ListenAndServe's defaults (no timeouts, no tuning),
// so it measures what a plain Go service gets. Run it with GOMAXPROCS=1 to
// compare one core against one moonhttp worker.
//
// Usage: go-bench [PORT]   (or PORT in the environment; default 8080)
package main

import (
	"log"
	"net/http"
	"os"
)

// jsonHandler writes a fixed JSON body. The body is converted to []byte once,
// outside the handler, so the handler measures net/http, not our conversions.
func jsonHandler(body string) http.HandlerFunc {
	b := []byte(body)
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}
}

func main() {
	port := os.Getenv("PORT")
	if len(os.Args) > 1 {
		port = os.Args[1]
	}
	if port == "" {
		port = "8080"
	}

	mux := http.NewServeMux()
	mux.Handle("/api/users", jsonHandler(`{"name":"baseline","users":[]}`))
	mux.Handle("/api/users/", jsonHandler(`{"name":"baseline","user":{}}`))
	mux.Handle("/api/orders", jsonHandler(`{"name":"baseline","orders":[]}`))
	mux.Handle("/api/orders/", jsonHandler(`{"name":"baseline","order":{}}`))
	item := jsonHandler(`{"name":"baseline","item":{}}`)
	for _, n := range []string{"0", "1", "2", "3", "4", "5", "6", "7"} {
		mux.Handle("/api/items/"+n, item)
	}

	// Loopback only: the benchmark must never listen on a real interface.
	log.Fatal(http.ListenAndServe("127.0.0.1:"+port, mux))
}
