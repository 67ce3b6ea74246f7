# Shared by the dashboard tests (dashboard*.sh, through tests/serve_test.bash:
# serve_test ... browser); sourced, not a test itself (ctest runs tests/*.sh). Needs SRC, BUILD and PW_VERSION; sets CHROMIUM (Debian's
# chromium) and PW (the folder where playwright-core is installed, on first
# use), or exits 0 with the reason (SKIP) where they cannot be installed.
# shellcheck shell=bash

apt_install() { # apt_install PKG...: as root, update the lists when the first try fails
    [ "$(id -u)" = 0 ] || return 1
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1 ||
        { apt-get update >/dev/null 2>&1 &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1; }
}
CHROMIUM=/usr/lib/chromium/chromium
[ -x "$CHROMIUM" ] || apt_install chromium
[ -x "$CHROMIUM" ] || { echo "SKIP: chromium cannot be installed here (Debian package chromium)"; exit 0; }
command -v npm >/dev/null || apt_install nodejs npm
command -v npm >/dev/null || { echo "SKIP: npm cannot be installed here (Debian packages nodejs, npm)"; exit 0; }
PW="$BUILD/playwright"
mkdir -p "$PW"
# One install at a time: the dashboard tests of a fresh build start
# together, and two npm installs into one folder collide (ENOTEMPTY); the
# others wait for the lock, then find it installed.
exec {pw_lock}>"$BUILD/playwright.lock"
flock "$pw_lock"
if [ ! -f "$PW/node_modules/playwright-core/package.json" ] ||
   ! grep -q "\"version\": \"$PW_VERSION\"" "$PW/node_modules/playwright-core/package.json"; then
    npm install --prefix "$PW" --no-audit --no-fund --loglevel=error "playwright-core@$PW_VERSION" >"$PW/install.log" 2>&1 ||
        { echo "SKIP: playwright-core cannot be installed from npm: $(tail -3 "$PW/install.log")"; exit 0; }
fi
flock -u "$pw_lock"
exec {pw_lock}>&-
# The scripts' shared module (tests/dashboard/lib.mjs), next to where each
# test copies its script; copied under a temporary name and renamed, so a
# test running at the same time never imports a half-written file.
cp "$SRC/tests/dashboard/lib.mjs" "$PW/lib.mjs.$$" && mv -f "$PW/lib.mjs.$$" "$PW/lib.mjs" ||
    { echo "FAIL: cannot copy tests/dashboard/lib.mjs to $PW"; exit 1; }
