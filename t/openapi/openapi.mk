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
	$(call npm_ci,t/openapi,$(OPENAPI_DIR))
