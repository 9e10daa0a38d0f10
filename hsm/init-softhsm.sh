#!/bin/sh
# Creates a SoftHSM2 token and the Custos KEK for development. Idempotent: an existing token or
# KEK is kept, never re-initialised (re-initialising a token destroys every key on it).
#
#   hsm/init-softhsm.sh                  # token "custos" under ./data/softhsm
#   CUSTOS_HSM_DIR=/var/lib/custos-hsm CUSTOS_PKCS11_TOKEN_LABEL=custos hsm/init-softhsm.sh
#
# Outputs: $CUSTOS_HSM_DIR/softhsm2.conf, tokens/, user.pin and so.pin (0600, random on first run).
# Then prints the environment to start Custos with the pkcs11 backend.
set -eu

HSM_DIR="${CUSTOS_HSM_DIR:-./data/softhsm}"
LABEL="${CUSTOS_PKCS11_TOKEN_LABEL:-custos}"
MODULE="${CUSTOS_PKCS11_MODULE:-/usr/lib/softhsm/libsofthsm2.so}"
KEK_LABEL="${CUSTOS_PKCS11_KEK_LABEL:-custos-kek}"
HERE="$(cd "$(dirname "$0")" && pwd)"

command -v softhsm2-util >/dev/null 2>&1 || { echo "softhsm2-util not found: apt-get install -y softhsm2" >&2; exit 1; }

umask 077
mkdir -p "$HSM_DIR/tokens"
chmod 700 "$HSM_DIR" "$HSM_DIR/tokens"
HSM_DIR="$(cd "$HSM_DIR" && pwd)"
CONF="$HSM_DIR/softhsm2.conf"
if [ ! -f "$CONF" ]; then
  printf 'directories.tokendir = %s/tokens\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n' "$HSM_DIR" > "$CONF"
fi
export SOFTHSM2_CONF="$CONF"

# Random 8-digit PINs on first run; kept in 0600 files, never printed.
random_pin() { od -An -N4 -tu4 /dev/urandom | tr -d ' ' | cut -c1-8 | awk '{printf "%08d\n", $1}'; }
[ -s "$HSM_DIR/user.pin" ] || random_pin > "$HSM_DIR/user.pin"
[ -s "$HSM_DIR/so.pin" ] || random_pin > "$HSM_DIR/so.pin"
chmod 600 "$HSM_DIR/user.pin" "$HSM_DIR/so.pin"

if softhsm2-util --show-slots 2>/dev/null | grep -Eq "Label:[[:space:]]+$LABEL[[:space:]]*$"; then
  echo "token \"$LABEL\" already exists in $HSM_DIR/tokens (kept)"
else
  softhsm2-util --init-token --free --label "$LABEL" \
    --so-pin "$(cat "$HSM_DIR/so.pin")" --pin "$(cat "$HSM_DIR/user.pin")" >/dev/null
  echo "token \"$LABEL\" created in $HSM_DIR/tokens"
fi

# The KEK is created by Custos' own code so it carries exactly the service's attribute template.
CUSTOS_PKCS11_MODULE="$MODULE" CUSTOS_PKCS11_TOKEN_LABEL="$LABEL" CUSTOS_PKCS11_PIN_FILE="$HSM_DIR/user.pin" \
CUSTOS_PKCS11_KEK_LABEL="$KEK_LABEL" CUSTOS_KEY_BACKEND=pkcs11 \
  sh -c 'cd "$1/.." && exec node --import tsx hsm/init-kek.ts' sh "$HERE"

if command -v pkcs11-tool >/dev/null 2>&1; then
  pkcs11-tool --module "$MODULE" --token-label "$LABEL" --login --pin "$(cat "$HSM_DIR/user.pin")" \
    --list-objects --type secrkey 2>/dev/null | sed 's/^/  /' || true
fi

cat <<EOT

Start Custos with:
  export SOFTHSM2_CONF=$CONF
  export CUSTOS_KEY_BACKEND=pkcs11
  export CUSTOS_PKCS11_MODULE=$MODULE
  export CUSTOS_PKCS11_TOKEN_LABEL=$LABEL
  export CUSTOS_PKCS11_PIN_FILE=$HSM_DIR/user.pin
  export CUSTOS_PKCS11_KEK_LABEL=$KEK_LABEL
EOT
