// A real OpenID provider (panva's oidc-provider) on 127.0.0.1 for logs-export's tests, and the
// keys it signs with. Run by crates/logs-testkit/src/oidc.rs with NODE_PATH naming the
// node_modules folder where `npm ci` installed this package's dependencies.
//
//   node provider.mjs genkey --alg RS256|PS256|ES256|EdDSA --kid K
//     prints {kid, alg, private_jwk, private_pem (PKCS#8), public_jwk} as one JSON line.
//   node provider.mjs serve --port P --config FILE
//     serves issuer http://127.0.0.1:P, configured by FILE (see `serve` below), and prints
//     `ready` once it listens.

import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const SCOPES = ['service:read', 'service:write'];

function fail(message) {
  process.stderr.write(`provider.mjs: ${message}\n`);
  process.exit(2);
}

function options(args, names) {
  const out = {};
  for (let i = 0; i < args.length; i += 2) {
    const name = args[i]?.replace(/^--/, '');
    if (!names.includes(name) || args[i + 1] === undefined) fail(`unexpected argument ${args[i]}`);
    out[name] = args[i + 1];
  }
  for (const name of names) if (out[name] === undefined) fail(`--${name} is required`);
  return out;
}

function genkey(args) {
  const { alg, kid } = options(args, ['alg', 'kid']);
  const kinds = {
    RS256: ['rsa', { modulusLength: 2048 }],
    PS256: ['rsa', { modulusLength: 2048 }],
    ES256: ['ec', { namedCurve: 'P-256' }],
    EdDSA: ['ed25519', {}],
  };
  if (!kinds[alg]) fail(`--alg must be one of ${Object.keys(kinds).join(', ')}`);
  const { privateKey, publicKey } = crypto.generateKeyPairSync(...kinds[alg]);
  const meta = { kid, alg, use: 'sig' };
  const out = {
    kid,
    alg,
    private_jwk: { ...privateKey.export({ format: 'jwk' }), ...meta },
    private_pem: privateKey.export({ format: 'pem', type: 'pkcs8' }),
    public_jwk: { ...publicKey.export({ format: 'jwk' }), ...meta },
  };
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

// The configuration file:
// {
//   "keys": [private JWK, ...],        published in this order; each client's JWT access tokens
//                                      are signed with the first key of its alg
//   "clients": [{"client_id", "client_secret", "scope": "service:read ...",
//                "applications": [1, 2] | "*", "alg": "RS256"}],
//   "audience": "https://logs.example/api",       the resource that is logs-export
//   "other_audience": "https://other.example/api", another resource (JWTs with another aud)
//   "applications_claim": "applications",
//   "access_token_ttl": 300,           seconds
//   "jwks_cache_control": null         a Cache-Control header for the JWKS answer, or null
// }
// A token asked for with `resource=<audience or other_audience>` is a JWT (typ at+jwt); one
// asked for without `resource` is opaque, and the introspection endpoint tells its claims.
async function serve(args) {
  const { port, config: file } = options(args, ['port', 'config']);
  const config = JSON.parse(fs.readFileSync(file, 'utf8'));
  const issuer = `http://127.0.0.1:${port}`;
  const claim = config.applications_claim ?? 'applications';
  const ttl = config.access_token_ttl ?? 300;
  const clients = new Map(config.clients.map((c) => [c.client_id, c]));
  const resources = new Set([config.audience, config.other_audience].filter(Boolean));

  // Found beside this file or, where `npm ci` installed it elsewhere, through NODE_PATH.
  const entry = createRequire(import.meta.url).resolve('oidc-provider');
  const { default: Provider, errors } = await import(pathToFileURL(entry).href);
  const provider = new Provider(issuer, {
    jwks: { keys: config.keys },
    clients: config.clients.map((c) => ({
      client_id: c.client_id,
      client_secret: c.client_secret,
      scope: c.scope,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    })),
    scopes: SCOPES,
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // Without `resource`, none: the token is opaque, with no aud.
        defaultResource: async () => undefined,
        getResourceServerInfo: async (_ctx, resource, client) => {
          if (!resources.has(resource)) throw new errors.InvalidTarget();
          return {
            scope: SCOPES.join(' '),
            audience: resource,
            accessTokenTTL: ttl,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: clients.get(client.clientId)?.alg ?? 'RS256' } },
          };
        },
      },
    },
    // Put into JWT access tokens as a claim, and into introspection answers of opaque ones.
    extraTokenClaims: async (_ctx, token) => {
      const client = clients.get(token.clientId);
      return client && client.applications !== undefined ? { [claim]: client.applications } : undefined;
    },
    ttl: { ClientCredentials: ttl },
  });
  if (config.jwks_cache_control) {
    provider.use(async (ctx, next) => {
      await next();
      if (ctx.path === '/jwks') ctx.set('cache-control', config.jwks_cache_control);
    });
  }
  const server = http.createServer(provider.callback());
  server.on('error', (e) => fail(`cannot listen on 127.0.0.1:${port}: ${e.message}`));
  server.listen(Number(port), '127.0.0.1', () => process.stdout.write('ready\n'));
  for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
}

const [command, ...rest] = process.argv.slice(2);
if (command === 'genkey') genkey(rest);
else if (command === 'serve') await serve(rest);
else fail('usage: provider.mjs genkey --alg ALG --kid K | serve --port P --config FILE');
