// The OpenID provider of the tests: npm's oidc-provider (panva's, OpenID-certified), run on
// loopback by crates/logs-testkit/src/oidc.rs. Two commands:
//
//   node provider.mjs genkey ALG KID      prints a new key pair as JSON
//   node provider.mjs serve CONFIG.json   serves the provider; prints `ready` when listening
//
// The configuration (written by oidc.rs): `port`; `keys`, private JWKs in order (all are
// published; a client's tokens are signed with the first key of its algorithm); `clients`,
// each with `client_id`, `client_secret`, `scope`, `applications` (put into its access tokens
// and introspection answers as the claim `applications_claim`) and `alg`; `resources`, the
// resource indicators that get JWT access tokens (the first is the service's audience);
// `access_token_ttl` in seconds; `jwks_cache_control`, a Cache-Control header for the JWKS
// answer (optional: the provider sends none of its own). A token asked for without a resource
// is opaque (introspected).

import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const [command, ...args] = process.argv.slice(2);

function genkey(alg, kid) {
  const kinds = {
    RS256: ['rsa', { modulusLength: 2048 }],
    PS256: ['rsa', { modulusLength: 2048 }],
    ES256: ['ec', { namedCurve: 'P-256' }],
    EdDSA: ['ed25519', {}],
  };
  const kind = kinds[alg];
  if (!kind) throw new Error(`no key type for ${alg}`);
  const { privateKey, publicKey } = generateKeyPairSync(kind[0], kind[1]);
  const meta = { kid, alg, use: 'sig' };
  return {
    kid,
    alg,
    private_jwk: { ...privateKey.export({ format: 'jwk' }), ...meta },
    private_pem: privateKey.export({ format: 'pem', type: 'pkcs8' }),
    public_jwk: { ...publicKey.export({ format: 'jwk' }), ...meta },
  };
}

function serve(config) {
  const clients = new Map(config.clients.map((c) => [c.client_id, c]));
  const scopes = ['service:read', 'service:write'];
  const provider = new Provider(`http://127.0.0.1:${config.port}`, {
    jwks: { keys: config.keys },
    clients: config.clients.map((c) => ({
      client_id: c.client_id,
      client_secret: c.client_secret,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      ...(c.scope ? { scope: c.scope } : {}),
      // Checked against the keys even for clients that never get an ID token.
      id_token_signed_response_alg: c.alg,
    })),
    scopes,
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      // Any client that authenticates may introspect any token (the service is one).
      introspection: { enabled: true, allowedPolicy: async () => true },
      resourceIndicators: {
        enabled: true,
        // No resource asked for: no resource server, so an opaque token.
        defaultResource: () => undefined,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resource, client) => {
          if (!config.resources.includes(resource)) throw new Error(`unknown resource ${resource}`);
          return {
            scope: scopes.join(' '),
            audience: resource,
            accessTokenFormat: 'jwt',
            accessTokenTTL: config.access_token_ttl,
            jwt: { sign: { alg: clients.get(client.clientId).alg } },
          };
        },
      },
    },
    ttl: { ClientCredentials: config.access_token_ttl },
    extraTokenClaims: (ctx, token) => {
      const client = clients.get(token.clientId);
      return client ? { [config.applications_claim]: client.applications } : undefined;
    },
  });
  if (config.jwks_cache_control) {
    provider.use(async (ctx, next) => {
      await next();
      if (ctx.path === '/jwks') ctx.set('cache-control', config.jwks_cache_control);
    });
  }
  const server = provider.listen(config.port, '127.0.0.1', () => console.log('ready'));
  const stop = () => server.close(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

if (command === 'genkey' && args.length === 2) {
  console.log(JSON.stringify(genkey(args[0], args[1])));
} else if (command === 'serve' && args.length === 1) {
  serve(JSON.parse(readFileSync(args[0], 'utf8')));
} else {
  console.error('usage: provider.mjs genkey ALG KID | provider.mjs serve CONFIG.json');
  process.exit(2);
}
