# The OpenAPI 3.1 validator that t/api/openapi.t runs on conf/openapi.yaml:
# @seriousme/openapi-schema-validator, pinned with its dependencies in
# t/openapi/package-lock.json, installed with npm ci into build/openapi.
# The stamp is remade (npm ci again) only when the pins change.
OPENAPI_DIR   = build/openapi
OPENAPI_STAMP = $(OPENAPI_DIR)/node_modules/.openapi-stamp

openapi-deps: $(OPENAPI_STAMP)
.PHONY: openapi-deps
TEST_TOOLS += openapi-deps

$(OPENAPI_STAMP): t/openapi/package.json t/openapi/package-lock.json
	@$(mine)
	@if ! command -v npm >/dev/null 2>&1; then \
	    echo "make: npm not found: 'make test-deps' (or t/tools/deps.sh test) installs it" >&2; \
	    exit 1; \
	fi
	@echo "  NPM   $(OPENAPI_DIR)"
	@mkdir -p $(OPENAPI_DIR)
	@cp t/openapi/package.json t/openapi/package-lock.json $(OPENAPI_DIR)/
	@cd $(OPENAPI_DIR) && npm ci --no-audit --no-fund --loglevel=error \
	    >npm.log 2>&1 || { cat npm.log >&2; exit 1; }
	@touch $@
	@$(give_back)
