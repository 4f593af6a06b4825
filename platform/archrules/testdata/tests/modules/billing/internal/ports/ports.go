package ports
