module moonhttp/bench/go

go 1.19
