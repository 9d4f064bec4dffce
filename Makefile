# The two commands of the README:
#   make demo   builds everything and runs `gpufrac demo`
#   make check  builds the sanitized test build and runs the whole suite
# Both install missing Debian packages first (scripts/deps.sh).
BUILD      ?= build
TEST_BUILD ?= build-test
JOBS       ?= $(shell nproc)

.PHONY: all deps build demo check bench clean kube-build kube-check

all: build

deps:
	./scripts/deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	$(BUILD)/bin/gpufrac demo

check: deps kube-build
	cmake -S . -B $(TEST_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGPUFRAC_SANITIZE=ON -DGPUFRAC_FUZZ=ON
	cmake --build $(TEST_BUILD) -j$(JOBS)
	cd $(TEST_BUILD) && ctest --output-on-failure -j$(JOBS)

# kube-apiserver, kube-scheduler and kubelet from Debian's kubernetes source
# package, cached in /var/cache/gpufrac (about 8 min on 2 cores the first time,
# nothing on a rerun): the tests/kube suite runs against them.
kube-build:
	./scripts/kube-build.sh >/dev/null

# Only the suite against the real Kubernetes components.
kube-check: deps kube-build
	cmake -S . -B $(TEST_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGPUFRAC_SANITIZE=ON -DGPUFRAC_FUZZ=ON
	cmake --build $(TEST_BUILD) -j$(JOBS) --target gpufrac-scheduler
	cd $(TEST_BUILD) && ctest --output-on-failure -L kube

bench: build
	$(BUILD)/bin/gpufrac-bench

clean:
	rm -rf $(BUILD) $(TEST_BUILD)
