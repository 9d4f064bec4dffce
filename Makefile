# SPDX-License-Identifier: Apache-2.0
# The two commands of the README:
#   make demo   builds only what `gpufrac demo` runs (no tests, no benchmarks)
#               and runs it; installs only the build packages (deps.sh build)
#   make check  builds the sanitized test build and runs the whole suite;
#               installs the build and the test packages (deps.sh all)
# Both install missing Debian packages first (scripts/deps.sh).
# Shipping it:
#   make install [PREFIX=/usr/local] [DESTDIR=...]   GNUInstallDirs layout
#   make deb     the Debian packages (build-deb/*.deb, lintian clean)
#   make image   the node and scheduler images, offline from Debian packages
#                (OCI layouts in build-image/oci/; prints their name:tag)
BUILD      ?= build
TEST_BUILD ?= build-test
JOBS       ?= $(shell nproc)
PREFIX     ?= /usr/local
DESTDIR    ?=

.PHONY: all deps deps-build build demo check bench clean install deb image ci-builds package-check build-matrix kube-build kube-check

all: build

deps:
	./scripts/deps.sh all

deps-build:
	./scripts/deps.sh build

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUFRAC_TESTS=ON
	cmake --build $(BUILD) -j$(JOBS)

# What the demo runs: the CLI, the agent, the shim, the probe and gpusim.
DEMO_TARGETS = gpufrac_cli gpufracd gpufrac gpufrac-probe gpusim_cuda gpusim_nvml
demo: deps-build
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUFRAC_TESTS=OFF
	cmake --build $(BUILD) -j$(JOBS) --target $(DEMO_TARGETS)
	$(BUILD)/bin/gpufrac demo

# The packages and the node image are built before ctest: cri.image runs
# gpufracd from that image.
check: deps kube-build
	cmake -S . -B $(TEST_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGPUFRAC_SANITIZE=ON -DGPUFRAC_FUZZ=ON
	cmake --build $(TEST_BUILD) -j$(JOBS)
	$(MAKE) package-check
	DEBS=build-deb ./scripts/build-image.sh build-image
	cd $(TEST_BUILD) && ctest --output-on-failure -j$(JOBS)
	$(MAKE) ci-builds

# CI also builds (no second test run) an optimized gcc build and a clang
# build, so a warning only they show fails CI.
ci-builds: deps
	COMPILERS=gcc TYPES=Release TESTS=ON JOBS=$(JOBS) ./scripts/build-matrix.sh build-ci
	COMPILERS=clang-14 TYPES=RelWithDebInfo TESTS=ON JOBS=$(JOBS) ./scripts/build-matrix.sh build-ci

# Every build type with gcc and clang (slow: ten builds).
build-matrix: deps
	JOBS=$(JOBS) ./scripts/build-matrix.sh build-matrix

install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

deb: deps
	@echo "make deb: building the packages from a copy of the tree into build-deb/ (a full build and lintian: minutes)"
	JOBS=$(JOBS) ./scripts/build-deb.sh build-deb

# Builds the .debs, installs them, runs gpufrac demo from /usr/bin, purges.
package-check: deps
	JOBS=$(JOBS) ./scripts/test-deb.sh build-deb; rc=$$?; [ $$rc = 0 ] || [ $$rc = 77 ]

image: deb
	DEBS=build-deb ./scripts/build-image.sh build-image

# kube-apiserver, kube-scheduler, kubelet, kube-controller-manager and kube-proxy
# from Debian's kubernetes source
# package, cached in /var/cache/gpufrac (about 8 min on 2 cores the first time,
# nothing on a rerun): the tests/kube suite runs against them.
kube-build:
	@echo "kube-build: the Kubernetes components for tests/kube (about 8 min on 2 cores the first time, cached in /var/cache/gpufrac)"
	./scripts/kube-build.sh >/dev/null

# Only the suite against the real Kubernetes components.
kube-check: deps kube-build
	cmake -S . -B $(TEST_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGPUFRAC_SANITIZE=ON -DGPUFRAC_FUZZ=ON
	cmake --build $(TEST_BUILD) -j$(JOBS) --target gpufrac-scheduler
	cd $(TEST_BUILD) && ctest --output-on-failure -L kube

bench: build
	$(BUILD)/bin/gpufrac-bench

clean:
	rm -rf $(BUILD) $(TEST_BUILD) build-ci build-matrix build-deb build-image
