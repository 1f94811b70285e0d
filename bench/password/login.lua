-- wrk script: POST /login, one connection, one login at a time.
wrk.method = "POST"
wrk.path = "/login"
