# Sourced by the hack/ scripts, from the checkout's top; defines venv_install, which makes the
# .venv with berthmaster installed (editable) plus the extras it is given (`venv_install test`).
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
  .venv/bin/python -m pip install --quiet -e ".${1:+[$1]}"
}
