#!/bin/bash
# The test identity provider (t/idp/idp.js) in the foreground, for a
# person trying the module by hand (make idp) and for t/package/guide.sh:
# makes a throw-away CA and a certificate for 127.0.0.1 in DIR, starts the
# provider, prints its issuer, ports, the CA file to trust, a token
# command and the lines for a <Location>; Ctrl-C (or SIGTERM) stops it.
#
#   t/idp/serve.sh [--dir DIR] [--port P] [--control-port C] [--aud AUD]
#
# Defaults: DIR build/idp-run, P 8443, C 8444, AUD lessons-api.  The
# provider's modules come from build/idp (make idp-deps, which make idp
# runs first); NODE_PATH or IDP_MODULES names another directory.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=$ROOT/build/idp-run
PORT=8443
CTL=8444
AUD=lessons-api
usage() { echo "usage: $0 [--dir DIR] [--port P] [--control-port C] [--aud AUD]" >&2; exit 2; }
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || usage
    case $1 in
        --dir) DIR=$2 ;;
        --port) PORT=$2 ;;
        --control-port) CTL=$2 ;;
        --aud) AUD=$2 ;;
        *) usage ;;
    esac
    shift 2
done
MODULES=${IDP_MODULES:-$ROOT/build/idp/node_modules}
[ -d "$MODULES/oauth2-mock-server" ] \
    || { echo "serve.sh: no provider modules in $MODULES: run make idp-deps" >&2; exit 1; }
command -v node >/dev/null || { echo "serve.sh: node not found: t/tools/deps.sh test installs it" >&2; exit 1; }

# A CA of its own, made once per directory and kept: a server told to
# trust it keeps working across restarts of the provider.
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
if [ ! -s "$DIR/ca.crt" ] || [ ! -s "$DIR/idp.crt" ]; then
    (
        cd "$DIR"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -keyout ca.key -out ca.crt -subj /CN=lessons-test-idp-ca -days 365
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -keyout idp.key -out idp.csr -subj /CN=127.0.0.1
        echo "subjectAltName=IP:127.0.0.1,DNS:localhost" >idp.ext
        openssl x509 -req -in idp.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
            -days 365 -extfile idp.ext -out idp.crt
    ) >"$DIR/openssl.log" 2>&1 || { cat "$DIR/openssl.log" >&2; exit 1; }
    chmod 644 "$DIR/ca.crt"
fi

ISS=https://127.0.0.1:$PORT
cat <<EOF
test identity provider (t/idp/idp.js; for tests and trials, never production)
  issuer         $ISS   (metadata: $ISS/.well-known/openid-configuration)
  token endpoint $ISS/token, control port http://127.0.0.1:$CTL (t/idp/idp.js lists its calls)
  CA to trust    $DIR/ca.crt
  a token:       curl -s --cacert $DIR/ca.crt -d grant_type=client_credentials \\
                      -d aud=$AUD -d scope='read write' $ISS/token
  in a <Location>:
                 LessonsJWTIssuer $ISS
                 LessonsJWTAudience $AUD
                 LessonsJWTKeysCA $DIR/ca.crt
Ctrl-C stops it.
EOF
export NODE_PATH=$MODULES
exec node "$ROOT/t/idp/idp.js" --port "$PORT" --control-port "$CTL" \
    --cert "$DIR/idp.crt" --key "$DIR/idp.key"
