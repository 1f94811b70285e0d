// The Go net/http peer of bench/tfb: the TechEmpower test types and the
// seed's 12 Redis routes on http.ServeMux, written as a Go user would: pgx v4
// (pgxpool), html/template, encoding/json, redigo. Built in GOPATH mode from
// Debian's packaged sources (bench/tfb/run.sh), so nothing is downloaded.
// Run with GOMAXPROCS=1. Environment: PORT, PGPORT, REDIS_PORT, POOL.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"log"
	"math/rand"
	"net/http"
	"os"
	"sort"
	"strconv"

	"github.com/gomodule/redigo/redis"
	"github.com/jackc/pgx/v4/pgxpool"
)

const rows = 10000

type World struct {
	ID           int32 `json:"id"`
	RandomNumber int32 `json:"randomNumber"`
}

type Fortune struct {
	ID      int32
	Message string
}

var (
	db    *pgxpool.Pool
	rpool *redis.Pool
	cache []World
	page  = template.Must(template.New("fortunes").Parse(`<!DOCTYPE html>
<html><head><title>Fortunes</title></head><body><table>
<tr><th>id</th><th>message</th></tr>
{{range .}}<tr><td>{{.ID}}</td><td>{{.Message}}</td></tr>
{{end}}</table></body></html>`))
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// count: the queries/count argument as an integer clamped to 1..500; anything else is 1.
func count(r *http.Request, name string) int {
	n, err := strconv.Atoi(r.URL.Query().Get(name))
	if err != nil || n < 1 {
		return 1
	}
	if n > 500 {
		return 500
	}
	return n
}

func header(w http.ResponseWriter, ctype string) {
	w.Header().Set("Server", "go")
	w.Header().Set("Content-Type", ctype)
}

func writeJSON(w http.ResponseWriter, v interface{}) {
	header(w, "application/json")
	json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, err error) {
	http.Error(w, err.Error(), http.StatusServiceUnavailable)
}

func randomWorld(ctx context.Context) (World, error) {
	var wd World
	err := db.QueryRow(ctx, "SELECT id, randomNumber FROM World WHERE id = $1", rand.Intn(rows)+1).
		Scan(&wd.ID, &wd.RandomNumber)
	return wd, err
}

func worlds(r *http.Request) ([]World, error) {
	out := make([]World, count(r, "queries"))
	for i := range out {
		wd, err := randomWorld(r.Context())
		if err != nil {
			return nil, err
		}
		out[i] = wd
	}
	return out, nil
}

func main() {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("host=127.0.0.1 port=%s user=postgres dbname=postgres pool_max_conns=%s",
		env("PGPORT", "5432"), env("POOL", "16")))
	if err != nil {
		log.Fatal(err)
	}
	if db, err = pgxpool.ConnectConfig(ctx, cfg); err != nil {
		log.Fatal(err)
	}
	pool, _ := strconv.Atoi(env("POOL", "16"))
	rpool = &redis.Pool{MaxIdle: pool, MaxActive: pool, Wait: true, Dial: func() (redis.Conn, error) {
		return redis.Dial("tcp", "127.0.0.1:"+env("REDIS_PORT", "6379"))
	}}
	cache = make([]World, rows+1)
	crows, err := db.Query(ctx, "SELECT id, randomNumber FROM CachedWorld")
	if err != nil {
		log.Fatal(err)
	}
	for crows.Next() {
		var wd World
		if err := crows.Scan(&wd.ID, &wd.RandomNumber); err != nil {
			log.Fatal(err)
		}
		cache[wd.ID] = wd
	}
	crows.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, struct {
			Message string `json:"message"`
		}{"Hello, World!"})
	})
	mux.HandleFunc("/plaintext", func(w http.ResponseWriter, r *http.Request) {
		header(w, "text/plain; charset=utf-8")
		w.Write([]byte("Hello, World!"))
	})
	mux.HandleFunc("/db", func(w http.ResponseWriter, r *http.Request) {
		wd, err := randomWorld(r.Context())
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, wd)
	})
	mux.HandleFunc("/queries", func(w http.ResponseWriter, r *http.Request) {
		out, err := worlds(r)
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, out)
	})
	mux.HandleFunc("/updates", func(w http.ResponseWriter, r *http.Request) {
		out, err := worlds(r)
		if err != nil {
			fail(w, err)
			return
		}
		fresh := map[int32]int32{}
		for i := range out {
			n, ok := fresh[out[i].ID]
			if !ok {
				n = int32(rand.Intn(rows) + 1)
				fresh[out[i].ID] = n
			}
			out[i].RandomNumber = n
		}
		ids := make([]int32, 0, len(fresh))
		for id := range fresh {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
		nums := make([]int32, len(ids))
		for i, id := range ids {
			nums[i] = fresh[id]
		}
		if _, err := db.Exec(r.Context(), "UPDATE World SET randomNumber = v.r FROM unnest($1::int[], $2::int[]) AS v(id, r) "+
			"WHERE World.id = v.id", ids, nums); err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, out)
	})
	mux.HandleFunc("/fortunes", func(w http.ResponseWriter, r *http.Request) {
		frows, err := db.Query(r.Context(), "SELECT id, message FROM Fortune")
		if err != nil {
			fail(w, err)
			return
		}
		fortunes := make([]Fortune, 0, 16)
		for frows.Next() {
			var f Fortune
			if err := frows.Scan(&f.ID, &f.Message); err != nil {
				frows.Close()
				fail(w, err)
				return
			}
			fortunes = append(fortunes, f)
		}
		frows.Close()
		fortunes = append(fortunes, Fortune{0, "Additional fortune added at request time."})
		sort.Slice(fortunes, func(a, b int) bool { return fortunes[a].Message < fortunes[b].Message })
		header(w, "text/html; charset=utf-8")
		page.Execute(w, fortunes)
	})
	mux.HandleFunc("/cached-queries", func(w http.ResponseWriter, r *http.Request) {
		out := make([]World, count(r, "count"))
		for i := range out {
			out[i] = cache[rand.Intn(rows)+1]
		}
		writeJSON(w, out)
	})
	seed := func(path, key, field string, empty interface{}) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			c := rpool.Get()
			name, err := redis.String(c.Do("GET", key))
			c.Close()
			if err != nil {
				fail(w, err)
				return
			}
			writeJSON(w, map[string]interface{}{"name": name, field: empty})
		})
	}
	seed("/api/users", "tfb:users", "users", []int{})
	seed("/api/users/", "tfb:user", "user", struct{}{})
	seed("/api/orders", "tfb:orders", "orders", []int{})
	seed("/api/orders/", "tfb:order", "order", struct{}{})
	for i := 0; i < 8; i++ {
		seed(fmt.Sprintf("/api/items/%d", i), fmt.Sprintf("tfb:item:%d", i), "item", struct{}{})
	}
	// Loopback only: the benchmark must never listen on a real interface.
	log.Fatal(http.ListenAndServe("127.0.0.1:"+env("PORT", "8080"), mux))
}
