#!/usr/bin/env bash
# Install what shmsched needs from Debian's packages, only where missing.
# Safe to run again; a fresh Debian machine needs nothing else by hand.
set -euo pipefail

packages=(
  gcc make cmake pkg-config    # the toolchain
  libck-dev                    # Concurrency Kit: atomics, seqlocks, bitmaps, rings
  libjemalloc-dev              # the executables' allocator
  check libsubunit-dev         # the test framework (static only; needs subunit)
  libinih-dev                  # the INI parser behind `create --config`
  libjansson-dev               # the JSON parser behind `submit --batch`
  clang-format                 # one style, checked in CI
  valgrind                     # the single-process suites under valgrind
  lcov                         # the library's line and branch coverage: scripts/coverage.sh
  gnuplot-nox strace           # perf/run.sh: plots; system calls counted per operation
  spin                         # the protocol models (tests/model) are checked with spin
  clang libclang-rt-14-dev     # libFuzzer and its sanitizers: scripts/fuzz.sh
  python3-dev                     # the Python binding (python/): its headers
  python3-pytest python3-venv python3-pip  # its tests; the install tests' venv and pip wheel
  prometheus python3-prometheus-client curl  # `metrics`: promtool check, the client's parser, scrapes
  prometheus-node-exporter        # `metrics --textfile` read by its textfile collector in a test
  libncurses-dev tmux             # `top`: its terminal view, and the terminal its test drives
  mandoc bash-completion          # the man pages' lint (mandoc -Tlint); the completion's test
  libslurm-dev                    # the Slurm plugin (slurm/): Slurm's spank.h
  slurmd slurmctld slurm-client munge  # its end-to-end test: a one-node cluster of its own
  systemd                         # systemd-analyze: the units_verify test
)

# cargo: the jobserver bridge's cargo test (tests/test_cli_jobserver.c), unless a cargo is there
# already (rustup's in ~/.cargo/bin counts). Debian 12's is 0.66: it reads the pipe style only.
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "${HOME:-/root}/.cargo/bin/cargo" ]; then
  packages+=(cargo)
fi

"$(dirname "$0")/apt-ensure.sh" setup "${packages[@]}"
