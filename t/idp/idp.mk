# The test identity provider of the JWKS URL tests (t/idp/idp.js):
# oauth2-mock-server and jose, pinned with their dependencies in
# t/idp/package-lock.json, installed with npm ci into build/idp.
# t/tools/integration.sh copies build/idp/node_modules next to its copy
# of t/idp and names that directory in LESSONS_TEST_IDP.  The stamp is
# remade (npm ci again) only when the pins change.
IDP_DIR   = build/idp
IDP_STAMP = $(IDP_DIR)/node_modules/.idp-stamp

idp-deps: $(IDP_STAMP)
.PHONY: idp-deps
TEST_TOOLS += idp-deps

$(IDP_STAMP): t/idp/package.json t/idp/package-lock.json
	$(call npm_ci,t/idp,$(IDP_DIR))

# make idp: the provider in the foreground for trying the module by hand
# (t/idp/serve.sh prints its issuer, ports, the CA to trust and a token
# command); Ctrl-C stops it.  IDP_PORT and IDP_CONTROL_PORT move it.
IDP_PORT ?= 8443
IDP_CONTROL_PORT ?= 8444
idp: $(IDP_STAMP)
	@t/idp/serve.sh --port $(IDP_PORT) --control-port $(IDP_CONTROL_PORT)
.PHONY: idp
