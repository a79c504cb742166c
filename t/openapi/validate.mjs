// Licensed under the Apache License, Version 2.0.
//
// Validate an OpenAPI 3.1 document: node validate.mjs NODE_MODULES FILE
//
// 1. @seriousme/openapi-schema-validator checks it against the OpenAPI
//    3.1 schema (and resolves every $ref);
// 2. Ajv's JSON Schema 2020-12 validator compiles every schema in it in
//    strict mode (the OpenAPI vocabulary's keywords allowed), so a
//    misspelt keyword or a bad pattern is an error, not silently ignored.
// Prints one JSON object, {"checks": [{"name", "ok", "errors"}...]}, and
// exits 1 when a check failed.  NODE_MODULES is the directory npm ci made
// (t/openapi/openapi.mk): ES modules do not look in NODE_PATH.
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [modulesArg, file] = process.argv.slice(2);
const modules = modulesArg && resolve(modulesArg);
if (!modules || !file) {
    console.error("usage: node validate.mjs NODE_MODULES FILE");
    process.exit(2);
}
const checks = [];
const check = (name, ok, errors) => checks.push({ name, ok: !!ok, errors });

const { Validator } = await import(pathToFileURL(
    join(modules, "@seriousme/openapi-schema-validator/index.js")).href);
const validator = new Validator();
const res = await validator.validate(file);
check("the OpenAPI 3.1 schema validator accepts the document", res.valid,
      res.errors);
check("the document is OpenAPI 3.1", validator.version === "3.1",
      validator.version);
if (res.valid) {
    let err;
    try { validator.resolveRefs(); } catch (e) { err = String(e); }
    check("every $ref resolves", !err, err);
}

const spec = validator.specification || {};
const require = createRequire(join(modules, "noop.js"));
const Ajv2020 = require("ajv/dist/2020").default;
const addFormats = require("ajv-formats").default;
const ajv = new Ajv2020({ strict: true, allErrors: true,
                          validateFormats: true });
addFormats(ajv);
for (const f of ["int32", "int64"]) {
    ajv.addFormat(f, { type: "number", validate: Number.isInteger });
}
for (const k of ["example", "discriminator", "xml", "externalDocs",
                 "components"]) {
    ajv.addKeyword(k);
}
// The components as one schema resource, so #/components/... refs resolve.
ajv.addSchema({ $id: "https://lessons.invalid/openapi.yaml", components: spec.components || {} });

// Every schema object of the document: components, parameters, headers,
// media types.
const schemas = [];
const walk = (node, path) => {
    if (!node || typeof node !== "object") return;
    for (const [k, v] of Object.entries(node)) {
        const p = `${path}/${k}`;
        if (k === "schema" && v && typeof v === "object"
            && !path.includes("/schemas/")) {
            schemas.push([p, v]);
        } else if (k === "schemas" && path === "#/components") {
            for (const [n, s] of Object.entries(v)) {
                schemas.push([`${p}/${n}`, s]);
            }
        } else {
            walk(v, p);
        }
    }
};
walk(spec, "#");
// Refs are document-relative: point them at the https://lessons.invalid/openapi.yaml resource.
const rebase = (s) => JSON.parse(JSON.stringify(s).replace(
    /"\$ref":"#\//g, '"$ref":"https://lessons.invalid/openapi.yaml#/'));
// A bare {$ref} is compiled where it points.
const failed = [];
let compiled = 0;
for (const [p, s] of schemas) {
    if (Object.keys(s).length === 1 && s.$ref) continue;
    compiled++;
    try { ajv.compile(rebase(s)); } catch (e) {
        failed.push(`${p}: ${e.message || e}`);
    }
}
check(`JSON Schema 2020-12 (strict mode) compiles each of the ${compiled} schemas`,
      compiled > 0 && failed.length === 0, failed);

console.log(JSON.stringify({ checks }));
process.exit(checks.every((c) => c.ok) ? 0 : 1);
