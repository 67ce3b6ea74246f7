#!/usr/bin/env bash
# Certificates for the TLS tests, made with the openssl CLI into DIR:
#   ca.crt/.key        the CA that signs the server and client certificates
#   otherca.crt/.key   a CA that signed nothing here (a "wrong CA")
#   server.crt/.key    for DNS:localhost, DNS:redis.test and IP:127.0.0.1
#   client.crt/.key    a client certificate (mutual TLS)
# Usage: make_certs.sh DIR
set -euo pipefail
cd "$1"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }
for ca in ca otherca; do
    key $ca
    openssl req -x509 -new -key $ca.key -out $ca.crt -days 2 -subj "/CN=rjq test $ca" 2>/dev/null
done
sign() { # name subject extensions
    key "$1"
    openssl req -new -key "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
    printf '%s\n' "$3" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" \
        -days 2 -extfile "$1.ext" 2>/dev/null
}
sign server "/CN=localhost" "subjectAltName=DNS:localhost,DNS:redis.test,IP:127.0.0.1"
sign client "/CN=rjq test client" "extendedKeyUsage=clientAuth"
