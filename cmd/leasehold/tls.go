package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/redis/rueidis"
)

// tlsFlags are the TLS flags every command accepts, as redis-cli and
// etcdctl name them. Each falls back to its LEASEHOLD_* variable.
type tlsFlags struct {
	vals map[string]string // flag name -> value given on the command line
}

// tlsSettings are the TLS flags, each with the variable it falls back to.
var tlsSettings = []struct{ flag, env, usage string }{
	{"tls", "LEASEHOLD_TLS", "talk TLS to Redis, as rediss:// does (default $LEASEHOLD_TLS)"},
	{"cacert", "LEASEHOLD_CACERT", "trust the CAs in this PEM `FILE` to sign the server's certificate, instead of the system's (default $LEASEHOLD_CACERT)"},
	{"cert", "LEASEHOLD_CERT", "present the client certificate in this PEM `FILE`; needs --key (default $LEASEHOLD_CERT)"},
	{"key", "LEASEHOLD_KEY", "the client certificate's private key, a PEM `FILE` (default $LEASEHOLD_KEY)"},
	{"insecure-skip-verify", "LEASEHOLD_INSECURE_SKIP_VERIFY", "accept any server certificate: encrypts, but does not check whom it talks to (default $LEASEHOLD_INSECURE_SKIP_VERIFY)"},
}

func (f *tlsFlags) register(fs *flag.FlagSet) {
	if f.vals == nil {
		f.vals = map[string]string{}
	}
	for _, s := range tlsSettings {
		set := func(v string) error { f.vals[s.flag] = v; return nil }
		if s.flag == "tls" || s.flag == "insecure-skip-verify" {
			fs.BoolFunc(s.flag, s.usage, set)
		} else {
			fs.Func(s.flag, s.usage, set)
		}
	}
}

// get returns the flag's value, else its variable's, and how it was given
// for messages ("--cacert", "LEASEHOLD_CACERT").
func (f *tlsFlags) get(name string) (val, from string) {
	for _, s := range tlsSettings {
		if s.flag != name {
			continue
		}
		if v, ok := f.vals[name]; ok {
			return v, "--" + name
		}
		return os.Getenv(s.env), s.env
	}
	panic("leasehold: no TLS setting " + name)
}

// boolean reads a boolean setting; "" is false.
func (f *tlsFlags) boolean(name string) (bool, error) {
	v, from := f.get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fail(exitUsage, "%s=%q: want true or false", from, v)
	}
	return b, nil
}

// apply sets opt's TLS configuration as the flags and variables ask: TLS
// is on with rediss:// or --tls, and the other settings need it on. With
// Sentinel it applies to the sentinels and to the master alike. opt comes
// from clientOption.
func (f *tlsFlags) apply(opt *rueidis.ClientOption) error {
	on, err := f.boolean("tls")
	if err != nil {
		return err
	}
	skip, err := f.boolean("insecure-skip-verify")
	if err != nil {
		return err
	}
	cacert, caFrom := f.get("cacert")
	cert, certFrom := f.get("cert")
	key, keyFrom := f.get("key")
	on = on || opt.TLSConfig != nil
	if !on {
		_, skipFrom := f.get("insecure-skip-verify")
		for from, set := range map[string]bool{caFrom: cacert != "", certFrom: cert != "", keyFrom: key != "", skipFrom: skip} {
			if set {
				return fail(exitUsage, "%s needs TLS: use a rediss:// URL or add --tls", from)
			}
		}
		return nil
	}
	if opt.DialCtxFn != nil { // only rueidis.ParseURL's unix:// sets it
		return fail(exitUsage, "TLS is not available on a unix socket: use a rediss:// URL to a TLS port")
	}
	if (cert == "") != (key == "") {
		return fail(exitUsage, "a client certificate needs both --cert and --key (or LEASEHOLD_CERT and LEASEHOLD_KEY)")
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if opt.TLSConfig != nil {
		tc = opt.TLSConfig.Clone()
	}
	if skip {
		tc.InsecureSkipVerify = true
	}
	if cacert != "" {
		pem, err := os.ReadFile(cacert)
		if err != nil {
			return fail(exitUsage, "%s: %v", caFrom, err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return fail(exitUsage, "%s %s: no PEM certificate in the file", caFrom, cacert)
		}
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return fail(exitUsage, "%s %s and %s %s: %v", certFrom, cert, keyFrom, key, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	opt.TLSConfig = tc
	if opt.Sentinel.MasterSet != "" {
		// The same settings serve the sentinels and the master they name,
		// as one --tls serves every connection of redis-cli (and go-redis's
		// FailoverOptions.TLSConfig both): rueidis dials the sentinels with
		// Sentinel.TLSConfig alone, plain when it is nil. Each connection
		// checks the certificate against the host it dials: the master's
		// is not the first sentinel's, which rueidis.ParseURL names.
		tc.ServerName = ""
		opt.Sentinel.TLSConfig = tc.Clone()
	}
	return nil
}

// knownURLOptions are the query options rueidis.ParseURL reads.
var knownURLOptions = []string{"addr", "client_cache", "client_name", "db", "dial_timeout", "master_set",
	"max_retries", "protocol", "skip_verify", "write_timeout"}

// checkURLOptions refuses a query option that rueidis.ParseURL would
// silently ignore.
func checkURLOptions(query map[string][]string) error {
	for name := range query {
		if !slices.Contains(knownURLOptions, name) {
			hint := ""
			if strings.HasPrefix(name, "tls") || strings.HasPrefix(name, "ssl") {
				hint = "; give TLS files with --cacert, --cert and --key"
			}
			return fmt.Errorf("unknown URL option %q (known: %s)%s", name, strings.Join(knownURLOptions, ", "), hint)
		}
	}
	return nil
}

// connectHint says what a failure to connect with opt suggests about TLS,
// as "; ..." to append to the error, or "".
func connectHint(opt rueidis.ClientOption, err error) string {
	reset := errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EPIPE)
	if opt.TLSConfig == nil {
		if reset {
			return "; is the server expecting TLS? use rediss:// or --tls"
		}
		return ""
	}
	var rh tls.RecordHeaderError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	switch {
	case errors.As(err, &rh):
		return "; the server does not speak TLS: use redis:// without --tls"
	case errors.As(err, &ua):
		return "; give the CA that signed the server's certificate with --cacert FILE"
	case errors.As(err, &hn):
		return "; the server's certificate is not for this address (use the host name it names, or --insecure-skip-verify to skip the check)"
	case len(opt.TLSConfig.Certificates) == 0 && (reset || strings.Contains(err.Error(), "certificate required")):
		return "; the server may require a client certificate: give --cert FILE and --key FILE"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return "; no TLS answer in time: if the server does not speak TLS, use redis:// without --tls"
	}
	return ""
}
