# Custos with SoftHSM2, for docker-compose.softhsm.yml. Not built or run in this repository's CI
# (no Docker engine there); kept simple and documented in hsm/README.md.
FROM node:20-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends softhsm2 opensc \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# Native addons (pkcs11js, better-sqlite3) build against the image's own Node headers.
ENV npm_config_nodedir=/usr/local
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts=false && npm cache clean --force
COPY . .

# Tokens live in a volume; the entrypoint creates the token and KEK on first start (idempotent).
ENV CUSTOS_HSM_DIR=/var/lib/custos-hsm \
    SOFTHSM2_CONF=/var/lib/custos-hsm/softhsm2.conf \
    CUSTOS_KEY_BACKEND=pkcs11 \
    CUSTOS_PKCS11_MODULE=/usr/lib/softhsm/libsofthsm2.so \
    CUSTOS_PKCS11_TOKEN_LABEL=custos \
    CUSTOS_PKCS11_PIN_FILE=/var/lib/custos-hsm/user.pin \
    CUSTOS_HOST=0.0.0.0 \
    CUSTOS_DATA_DIR=/var/lib/custos
RUN mkdir -p /var/lib/custos-hsm /var/lib/custos && chown -R node:node /var/lib/custos-hsm /var/lib/custos
USER node
EXPOSE 8080
CMD ["sh", "-c", "hsm/init-softhsm.sh && exec node --import tsx src/cli/main.ts serve"]
