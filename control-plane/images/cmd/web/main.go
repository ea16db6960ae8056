// Command web is the small web server of the local node's example image
// (wcm.local/web): what a WebApp runs in the demo and the tests, so its Pods really
// serve and become Ready. It listens on $PORT (8080 by default) and answers every
// path with $MESSAGE (a greeting by default) and the Pod's name; /healthz answers ok.
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
)

func main() {
	port := getenv("PORT", "8080")
	message := getenv("MESSAGE", "hello from wasm-controller-manager's example web server")
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "%s (%s)\n", message, host)
	})
	log.Printf("web: listening on :%s", port)
	log.Fatal(http.ListenAndServe(":"+port, mux))
}

func getenv(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}
