module github.com/libtrie/libtrie/bindings/go

go 1.19
