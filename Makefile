# The two commands of the README, and a few helpers.
#   make run   set up the machine, build (Release), seed demo data if the
#              database is empty, serve on :8080
#   make test  set up the machine, build, run every test (and the
#              ASan+UBSan build of the unit and HTTP tests, each fuzz
#              target for 300,000 runs with a fixed seed, the short fault
#              rig and 5 crash rounds)
JOBS ?= 2
DB ?= sqlite:data/hotrow.db

.PHONY: all setup build run test test-release test-sanitize test-fuzz test-faults faults bench bench-alloc format lint fuzz image compose-test clean

all: build

setup:
	@scripts/setup.sh

build: setup
	cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build build -j$(JOBS)

run: build
	build/hotrow seed dateplans --count 1000 --if-empty --db $(DB)
	build/hotrow seed leaderboard --clients 1000 --if-empty --db $(DB)
	build/hotrow seed pointcard --cards 1000 --stores 100 --history 5000 --if-empty --db $(DB)
	build/hotrow serve --db $(DB)

test: test-release test-sanitize test-fuzz test-faults

test-release: build
	ctest --test-dir build --output-on-failure -j$(JOBS) --timeout 600

# The sanitizer build uses clang: it builds this tree in about two thirds of
# g++'s time (docs/testing.md). A build-asan/ configured with another
# compiler is configured afresh.
test-sanitize: setup
	@if [ -f build-asan/CMakeCache.txt ] && ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++' build-asan/CMakeCache.txt; then \
	  echo "build-asan/ was configured with another compiler: configuring it afresh with clang++"; rm -rf build-asan; fi
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHOTROW_SANITIZE=ON -DCMAKE_CXX_COMPILER=clang++ >/dev/null
	cmake --build build-asan -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir build-asan --output-on-failure -j$(JOBS) --timeout 900 -L 'unit|http|pg'

# Each fuzz target for 300,000 runs from its seed corpus with a fixed seed
# (the same mutations on every machine; 1-15 s each here) after replaying
# its past findings.
test-fuzz: setup
	scripts/fuzz.sh --runs 300000 --seed 1

# The fault rig (faults/, docs/reliability.md), short and with fixed seeds:
# the checkers' own tests, the rig's self-test (a like lost behind hotrow's
# back must be found), 90 s of faults on the cluster, 30 s on the embedded
# store, 5 crash rounds and the 3 failpoints.
test-faults: build
	python3 faults/test_checks.py
	python3 faults/rig.py embedded --seconds 3 --seed 1 --sabotage
	python3 faults/rig.py cluster --seconds 90 --seed 1
	python3 faults/rig.py embedded --seconds 30 --seed 1
	python3 faults/rig.py crash --rounds 5 --seed 1

# The long runs, random seeds (printed; --seed replays): FAULT_MINUTES of
# faults on the cluster and a third of that on the embedded store, 100
# crash rounds, then the overload cases.
FAULT_MINUTES ?= 30
faults: build
	python3 faults/rig.py cluster --seconds $$(($(FAULT_MINUTES) * 40))
	python3 faults/rig.py embedded --seconds $$(($(FAULT_MINUTES) * 20))
	python3 faults/rig.py crash --rounds 100
	python3 faults/overload.py

bench: build
	bench/dateplan.sh

bench-alloc: build
	bench/alloc.sh

lint: build
	scripts/lint.sh

# The container image localhost/hotrow:latest (Containerfile; podman, with
# --format docker so its HEALTHCHECK is kept). Where no registry is
# reachable the base is built with debootstrap (scripts/container-base.sh).
IMAGE ?= localhost/hotrow:latest
BASE_IMAGE ?= localhost/debian:bookworm
image:
	@scripts/setup.sh containers
	scripts/container-base.sh $(BASE_IMAGE)
	. scripts/podman-env.sh && podman build --format docker --build-arg BASE=$(BASE_IMAGE) \
	  --build-arg HOTROW_COMMIT=$$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown) \
	  --build-arg JOBS=$(JOBS) -t $(IMAGE) -f Containerfile .

# The compose stack, up, tested and down (minutes; docs/deploy.md).
compose-test: build image
	scripts/compose-test

fuzz: setup
	scripts/fuzz.sh

format: setup
	scripts/check-format.sh --fix

clean:
	rm -rf build build-asan build-fuzz
