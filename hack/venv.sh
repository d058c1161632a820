# Sourced by the hack/ scripts, from the checkout's top; defines venv_install, which makes the
# .venv with berthmaster installed (editable) plus the extras it is given (`venv_install test`).
# Every dependency installs at its locked version (hack/image/requirements-test.lock: all the
# extras resolved together, for every Python pyproject.toml allows); the image's lock
# (requirements.lock) is its runtime part at the same versions, so the tests run what the image
# ships (hack/image/README.md).
# operator/ and scheduler/ sit at the top of the checkout: never let `python -m` put the
# checkout first on sys.path, where operator/ would shadow the standard library's operator.
export PYTHONSAFEPATH=1

venv_install() {
  if [ ! -x .venv/bin/python ]; then
    echo "==> creating the Python environment (.venv)"
    python3 -m venv .venv
  fi
  echo "==> installing berthmaster${1:+ and its $1 extras}"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".${1:+[$1]}" \
    --constraint hack/image/requirements-test.lock
}
