# The README's two commands, and a few conveniences.
.PHONY: demo test test-long unit build down e2e image release publish

demo:           ## bring up the local control plane and show berthmaster at work
	bash hack/demo.sh

test:           ## the test suite (what CI runs first; the soak runs are left to test-long)
	bash hack/test.sh

test-long:      ## the soak runs make test leaves out (tests marked long; CI runs them after it)
	BERTHMASTER_TEST_WORKERS=1 bash hack/test.sh --long -m long

unit:           ## unit tests only (no cluster)
	BERTHMASTER_TEST_WORKERS=1 bash hack/test.sh tests/unit

build:          ## build the local control plane binaries (cached)
	.venv/bin/berthmaster dev build

down:           ## stop the demo cluster
	.venv/bin/berthmaster dev down

e2e:            ## end-to-end: image, cluster (kind, or a real kubelet here), chart, e2e/ (MODE=auto|kind|kubelet)
	bash hack/e2e.sh --mode $(or $(MODE),auto)

image:          ## build the image berthmaster:dev with Docker (works with no registry: see docs/deployment.md)
	bash hack/image.sh

release:        ## dist/: the packaged chart, the image as an OCI archive, the release notes (SKIP_IMAGE=1: no image)
	PYTHONSAFEPATH=1 .venv/bin/python hack/release.py $(if $(SKIP_IMAGE),--skip-image,)

publish:        ## push the image (signed, SBOM attested) and the chart to REGISTRY=host:port/path (after make release; COSIGN_KEY, COSIGN_PASSWORD)
	@test -n "$(REGISTRY)" || { echo "publish: set REGISTRY=host[:port][/path]" >&2; exit 1; }
	PYTHONSAFEPATH=1 .venv/bin/python hack/publish.py --registry $(REGISTRY) $(if $(OFFLINE),--offline,)
