package host
