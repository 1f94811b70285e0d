module goclient

go 1.19
