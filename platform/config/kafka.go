package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// loadKafkaSecurity validates the PIN_KAFKA_SASL_* and PIN_KAFKA_TLS*
// variables, reads the files they name and fills KafkaSASLPassword and
// KafkaTLSConfig. Its errors name a file, never a secret.
func (c *Config) loadKafkaSecurity() error {
	if err := c.loadSASL(); err != nil {
		return err
	}
	if !c.KafkaTLS {
		return c.refuseTLSFilesWithoutTLS()
	}
	tc, err := c.loadTLS()
	if err != nil {
		return err
	}
	c.KafkaTLSConfig = tc
	return nil
}

// loadSASL reads PIN_KAFKA_SASL_PASSWORD_FILE into KafkaSASLPassword and
// checks that a mechanism comes with its user name and password.
func (c *Config) loadSASL() error {
	if c.KafkaSASLPasswordFile != "" {
		if c.KafkaSASLPassword != "" {
			return &Error{"PIN_KAFKA_SASL_PASSWORD_FILE", "set it or PIN_KAFKA_SASL_PASSWORD, not both"}
		}
		b, err := os.ReadFile(c.KafkaSASLPasswordFile)
		if err != nil {
			return &Error{"PIN_KAFKA_SASL_PASSWORD_FILE", fmt.Sprintf("cannot read %s: %v", c.KafkaSASLPasswordFile, pathErr(err))}
		}
		c.KafkaSASLPassword = trimOneNewline(string(b))
		if c.KafkaSASLPassword == "" {
			return &Error{"PIN_KAFKA_SASL_PASSWORD_FILE", fmt.Sprintf("%s is empty", c.KafkaSASLPasswordFile)}
		}
	}
	switch c.KafkaSASLMechanism {
	case "":
		if c.KafkaSASLUsername != "" || c.KafkaSASLPassword != "" {
			return &Error{"PIN_KAFKA_SASL_MECHANISM", "is required when a SASL user name or password is set (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)"}
		}
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if c.KafkaSASLUsername == "" {
			return &Error{"PIN_KAFKA_SASL_USERNAME", "is required with PIN_KAFKA_SASL_MECHANISM"}
		}
		if c.KafkaSASLPassword == "" {
			return &Error{"PIN_KAFKA_SASL_PASSWORD", "or PIN_KAFKA_SASL_PASSWORD_FILE is required with PIN_KAFKA_SASL_MECHANISM"}
		}
	default:
		return &Error{"PIN_KAFKA_SASL_MECHANISM", fmt.Sprintf("must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, got %q", c.KafkaSASLMechanism)}
	}
	return nil
}

// refuseTLSFilesWithoutTLS stops a TLS setting that PIN_KAFKA_TLS=false
// would silently ignore.
func (c *Config) refuseTLSFilesWithoutTLS() error {
	for _, v := range []struct{ name, value string }{
		{"PIN_KAFKA_TLS_CA_FILE", c.KafkaTLSCAFile},
		{"PIN_KAFKA_TLS_CERT_FILE", c.KafkaTLSCertFile},
		{"PIN_KAFKA_TLS_KEY_FILE", c.KafkaTLSKeyFile},
		{"PIN_KAFKA_TLS_SERVER_NAME", c.KafkaTLSServerName},
	} {
		if v.value != "" {
			return &Error{"PIN_KAFKA_TLS", fmt.Sprintf("must be true when %s is set", v.name)}
		}
	}
	return nil
}

// loadTLS builds the client's TLS settings: the CA file's roots (or the
// system's) and, when both are given, the client certificate and its key.
func (c *Config) loadTLS() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.KafkaTLSServerName}
	if c.KafkaTLSCAFile != "" {
		pem, err := os.ReadFile(c.KafkaTLSCAFile)
		if err != nil {
			return nil, &Error{"PIN_KAFKA_TLS_CA_FILE", fmt.Sprintf("cannot read %s: %v", c.KafkaTLSCAFile, pathErr(err))}
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, &Error{"PIN_KAFKA_TLS_CA_FILE", fmt.Sprintf("%s holds no PEM certificate", c.KafkaTLSCAFile)}
		}
	}
	pair, err := c.loadClientCertificate()
	if err != nil {
		return nil, err
	}
	if pair != nil {
		tc.Certificates = []tls.Certificate{*pair}
	}
	return tc, nil
}

// loadClientCertificate reads PIN_KAFKA_TLS_CERT_FILE and
// PIN_KAFKA_TLS_KEY_FILE, which come together or not at all; nil when neither is set.
func (c *Config) loadClientCertificate() (*tls.Certificate, error) {
	switch {
	case c.KafkaTLSCertFile == "" && c.KafkaTLSKeyFile == "":
		return nil, nil
	case c.KafkaTLSKeyFile == "":
		return nil, &Error{"PIN_KAFKA_TLS_KEY_FILE", "is required with PIN_KAFKA_TLS_CERT_FILE"}
	case c.KafkaTLSCertFile == "":
		return nil, &Error{"PIN_KAFKA_TLS_CERT_FILE", "is required with PIN_KAFKA_TLS_KEY_FILE"}
	}
	for _, f := range []struct{ name, path string }{{"PIN_KAFKA_TLS_CERT_FILE", c.KafkaTLSCertFile}, {"PIN_KAFKA_TLS_KEY_FILE", c.KafkaTLSKeyFile}} {
		if _, err := os.Stat(f.path); err != nil {
			return nil, &Error{f.name, fmt.Sprintf("cannot read %s: %v", f.path, pathErr(err))}
		}
	}
	pair, err := tls.LoadX509KeyPair(c.KafkaTLSCertFile, c.KafkaTLSKeyFile)
	if err != nil {
		return nil, &Error{"PIN_KAFKA_TLS_CERT_FILE", fmt.Sprintf("with PIN_KAFKA_TLS_KEY_FILE is not a certificate and its key: %v", err)}
	}
	return &pair, nil
}

// trimOneNewline drops one trailing newline, as editors and `echo` add.
func trimOneNewline(s string) string {
	s = strings.TrimSuffix(s, "\n")
	return strings.TrimSuffix(s, "\r")
}

// pathErr keeps only the reason of an *os.PathError: the caller names the path.
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
