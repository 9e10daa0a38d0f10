#!/usr/bin/env bash
# Installs the system parts Custos's tests use for real (Debian 12): SoftHSM2 (PKCS#11), OpenSSH
# (client, server, ssh-add, ssh-keygen), git, and makes sure the local PostgreSQL is up.
# Idempotent; needs root (apt-get). Fails loudly: a missing part must fail CI, never skip tests.
set -euo pipefail

PACKAGES=(softhsm2 opensc openssh-client openssh-server git)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup-system: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
for bin in softhsm2-util ssh ssh-add ssh-keygen /usr/sbin/sshd git; do
  command -v "$bin" >/dev/null 2>&1 || { echo "setup-system: $bin is still missing" >&2; exit 1; }
done
test -f /usr/lib/softhsm/libsofthsm2.so || { echo "setup-system: SoftHSM2 module missing" >&2; exit 1; }

# PostgreSQL on 127.0.0.1:5432 (trust auth for local connections on these machines).
if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  echo "setup-system: starting PostgreSQL"
  version=$(ls /etc/postgresql | sort -V | tail -1)
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432 || { echo "setup-system: PostgreSQL is not reachable on 127.0.0.1:5432" >&2; exit 1; }
psql -h 127.0.0.1 -U postgres -d postgres -tAc 'select 1' >/dev/null || { echo "setup-system: cannot connect to PostgreSQL as postgres" >&2; exit 1; }
echo "setup-system: ok"
