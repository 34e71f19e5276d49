#!/usr/bin/env bash
# Make a private test CA and a broker certificate it signs, for Mosquitto's TLS
# listener (deploy/mosquitto/mosquitto.conf: cafile/certfile/keyfile).
#
#   scripts/make_certs.sh OUT_DIR [DNS_NAME_OR_IP ...]
#
# OUT_DIR gets ca.crt (give this to nodes and the gateway), ca.key (keep offline),
# server.crt and server.key (the broker's). The server certificate names
# localhost, 127.0.0.1 and every extra name given. See deploy/mosquitto/certs/README.md.
set -euo pipefail

out=${1:?usage: make_certs.sh OUT_DIR [DNS_NAME_OR_IP ...]}
shift
days=${CERT_DAYS:-825}
mkdir -p "$out"
cd "$out"

san="DNS:localhost,IP:127.0.0.1"
for name in "$@"; do
  if [[ $name =~ ^[0-9.]+$ || $name == *:* ]]; then san+=",IP:$name"; else san+=",DNS:$name"; fi
done

umask 077
openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days "$days" \
  -keyout ca.key -out ca.crt -subj "/CN=SumpWatch test CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  2>/dev/null
openssl req -newkey rsa:2048 -nodes -sha256 -keyout server.key -out server.csr \
  -subj "/CN=${1:-localhost}" 2>/dev/null
printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' \
  "$san" > server.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" \
  -sha256 -extfile server.ext -out server.crt 2>/dev/null
rm -f server.csr server.ext ca.srl
chmod 644 ca.crt server.crt
echo "wrote $out/{ca.crt,ca.key,server.crt,server.key} for $san"
