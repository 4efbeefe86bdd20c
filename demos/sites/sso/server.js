// A single sign-on test site for session_keeper's tests, on one HTTPS port on 127.0.0.1:
//
// - idp.example: an OpenID Connect provider (the `oidc-provider` package, certified), with
//   password accounts, a login page with a Cancel button, consent granted without asking,
//   prompt=none, RP-initiated logout, and a test-only endpoint that ends every session of
//   an account (a server-side sign-out);
// - app.example and wiki.example: relying parties on `openid-client` (authorization code +
//   PKCE), signing in by redirect, by popup (window.open + postMessage) and by a hidden
//   prompt=none iframe;
// - news.example: a public site that signs nobody in (a page for other conversations).
//
// The host is chosen by the Host header: the browser maps *.example here with
// --host-resolver-rules. Every request answered is written to the log file as one JSON line
// {server, host, method, path, status, account, event, client, prompt, time}: `account` is
// the account the server served the request as (the session the request carried; for a
// sign-in, the account it signed in), or null. Never a cookie value, code or token.
//
// Started by demos/sites/sso.py: node server.js --cert F --key F --log F. Prints
// "ready <port>" once every server answers.
import { appendFileSync, readFileSync } from 'node:fs';
import * as crypto from 'node:crypto';
import * as https from 'node:https';
import { parseArgs } from 'node:util';

import Provider from 'oidc-provider';
import * as oidc from 'openid-client';

const { values: opts } = parseArgs({
  options: {
    cert: { type: 'string' },
    key: { type: 'string' },
    log: { type: 'string' },
    port: { type: 'string', default: '0' },
  },
});
if (!opts.cert || !opts.key || !opts.log) {
  console.error('usage: node server.js --cert CERT.pem --key KEY.pem --log LOG.jsonl [--port N]');
  process.exit(2);
}
const CERT = readFileSync(opts.cert);
const KEY = readFileSync(opts.key);

const IDP = 'idp.example';
const RPS = ['app.example', 'wiki.example'];
const NEWS = 'news.example';
const SERVERS = { [IDP]: 'idp', 'app.example': 'app', 'wiki.example': 'wiki', [NEWS]: 'news' };

// Test accounts. The passwords are the point of a sign-in form; they are never logged.
const ACCOUNTS = {
  ada: { password: 'correct horse battery', name: 'Ada Lovelace' },
  bob: { password: 'tr0ub4dor', name: 'Bob Bobson' },
};

const random = () => crypto.randomBytes(24).toString('base64url');
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const page = (title, body) => `<!doctype html><html><head><meta charset="utf-8"><title>${esc(title)}</title></head><body><h1>${esc(title)}</h1>${body}</body></html>`;

function parseCookies(header) {
  const out = {};
  for (const part of (header || '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0) out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

// SameSite=None; Secure: cookies that flow into cross-site frames and fetches, as an
// embedded sign-in needs (and the hardest case for the Guard).
const cookie = (name, value, maxAge) => `${name}=${value}; Path=/; Secure; HttpOnly; SameSite=None${maxAge === undefined ? '' : `; Max-Age=${maxAge}`}`;

function send(res, status, type, body, headers = {}) {
  res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store', ...headers });
  res.end(body);
}

async function readForm(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return new URLSearchParams(Buffer.concat(chunks).toString());
}

// -- the identity provider's storage: one Map, so that a test can end an account's sessions --
const store = new Map(); // `${model}:${id}` -> { payload, expiresAt }

class MapAdapter {
  constructor(model) {
    this.model = model;
  }

  key(id) {
    return `${this.model}:${id}`;
  }

  live(entry) {
    return entry && (entry.expiresAt === null || entry.expiresAt > Date.now()) ? entry : undefined;
  }

  * mine() {
    for (const [key, entry] of store) {
      if (key.startsWith(`${this.model}:`) && this.live(entry)) yield [key, entry];
    }
  }

  async upsert(id, payload, expiresIn) {
    store.set(this.key(id), { payload, expiresAt: expiresIn ? Date.now() + expiresIn * 1000 : null });
  }

  async find(id) {
    return this.live(store.get(this.key(id)))?.payload;
  }

  async findByUid(uid) {
    for (const [, entry] of this.mine()) if (entry.payload.uid === uid) return entry.payload;
    return undefined;
  }

  async findByUserCode(userCode) {
    for (const [, entry] of this.mine()) if (entry.payload.userCode === userCode) return entry.payload;
    return undefined;
  }

  async consume(id) {
    const entry = this.live(store.get(this.key(id)));
    if (entry) entry.payload.consumed = Math.floor(Date.now() / 1000);
  }

  async destroy(id) {
    store.delete(this.key(id));
  }

  async revokeByGrantId(grantId) {
    for (const [key, entry] of [...store]) if (entry.payload.grantId === grantId) store.delete(key);
  }
}

const sessionAccount = (sessionId) => {
  if (!sessionId) return null;
  const entry = store.get(`Session:${sessionId}`);
  return entry && (entry.expiresAt === null || entry.expiresAt > Date.now()) ? entry.payload.accountId ?? null : null;
};

function signOutEverywhere(account) {
  let destroyed = 0;
  for (const [key, entry] of [...store]) {
    if (key.startsWith('Session:') && entry.payload.accountId === account) {
      store.delete(key);
      destroyed += 1;
    }
  }
  return destroyed;
}

// -- the identity provider ---------------------------------------------------------------
const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'sso-test', use: 'sig', alg: 'RS256' };
const CLIENT_SECRETS = Object.fromEntries(RPS.map((host) => [host, random()]));
const clientId = (host) => host.split('.')[0];

const provider = new Provider(`https://${IDP}`, {
  adapter: MapAdapter,
  clients: RPS.map((host) => ({
    client_id: clientId(host),
    client_secret: CLIENT_SECRETS[host],
    redirect_uris: [`https://${host}/callback`],
    post_logout_redirect_uris: [`https://${host}/`],
    grant_types: ['authorization_code'],
    response_types: ['code'],
  })),
  jwks: { keys: [signingKey] },
  cookies: {
    keys: [random()],
    long: { httpOnly: true, sameSite: 'none', secure: true },
    short: { httpOnly: true, sameSite: 'none', secure: true },
  },
  claims: { openid: ['sub'], profile: ['name'] },
  async findAccount(ctx, sub) {
    if (!ACCOUNTS[sub]) return undefined;
    return { accountId: sub, claims: async () => ({ sub, name: ACCOUNTS[sub].name }) };
  },
  // First-party relying parties: consent is granted without asking (the documented way).
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    if (!ctx.oidc.session.accountId) return undefined;
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope('openid profile');
    await grant.save();
    return grant;
  },
  interactions: { url: async (ctx, interaction) => `/interaction/${interaction.uid}` },
  pkce: { required: () => true },
  ttl: { AccessToken: 600, AuthorizationCode: 60, Grant: 3600, IdToken: 600, Interaction: 600, Session: 3600 },
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: {
      enabled: true,
      // Signs out without asking (the provider's own form, submitted with logout=yes).
      async logoutSource(ctx, form) {
        ctx.body = `<!doctype html><title>Signing out</title>${form}<script>const f = document.forms[0]; const i = document.createElement('input'); i.type = 'hidden'; i.name = 'logout'; i.value = 'yes'; f.appendChild(i); f.submit();</script>`;
      },
    },
  },
  async renderError(ctx, out) {
    ctx.type = 'html';
    ctx.body = page('Identity provider error', `<p id="error">${esc(out.error)}</p>`);
  },
});

// A code issued is served as the session's account (a resumed sign-in carried no session
// cookie yet), to the client that asked.
provider.on('authorization.success', (ctx) => {
  const entry = ctx.req.ssoEntry;
  if (!entry) return;
  entry.account = ctx.oidc.session?.accountId ?? entry.account;
  entry.client ??= ctx.oidc.client?.clientId ?? null;
});
provider.on('authorization.error', (ctx) => {
  const entry = ctx.req.ssoEntry;
  if (entry) entry.client ??= ctx.oidc?.client?.clientId ?? null;
});

function loginForm(uid, client, message = '') {
  return page('Sign in to the identity provider', `
    <p>Signing in to <b id="client">${esc(client)}</b></p>
    ${message ? `<p id="message">${esc(message)}</p>` : ''}
    <form method="post" action="/interaction/${esc(uid)}/login">
      <label>Username <input name="username" autocomplete="username" autofocus></label>
      <label>Password <input name="password" type="password" autocomplete="current-password"></label>
      <button type="submit" id="sign-in">Sign in</button>
    </form>
    <form method="post" action="/interaction/${esc(uid)}/abort">
      <button type="submit" id="cancel">Cancel</button>
    </form>`);
}

// The interaction pages (what a real deployment writes itself) and the test-only endpoint.
provider.use(async (ctx, next) => {
  const entry = ctx.req.ssoEntry;
  const match = ctx.path.match(/^\/interaction\/([^/]+)(?:\/(login|abort))?$/);
  if (match) {
    ctx.set('Cache-Control', 'no-store');
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    const client = details.params.client_id;
    if (match[2] === 'abort') {
      entry.event = 'cancel';
      return provider.interactionFinished(ctx.req, ctx.res, {
        error: 'access_denied',
        error_description: 'End-User aborted interaction',
      }, { mergeWithLastSubmission: false });
    }
    if (details.prompt.name !== 'login') {
      // Consent is loaded by loadExistingGrant; any other prompt is not expected here.
      ctx.status = 400;
      ctx.body = page('Unexpected prompt', `<p>${esc(details.prompt.name)}</p>`);
      return undefined;
    }
    if (match[2] === 'login' && ctx.method === 'POST') {
      const form = await readForm(ctx.req);
      const username = form.get('username') || '';
      if (!Object.hasOwn(ACCOUNTS, username) || ACCOUNTS[username].password !== form.get('password')) {
        entry.event = 'login-refused';
        ctx.type = 'html';
        ctx.body = loginForm(details.uid, client, 'Wrong username or password.');
        return undefined;
      }
      entry.event = 'login';
      entry.account = username;
      return provider.interactionFinished(ctx.req, ctx.res, { login: { accountId: username } }, { mergeWithLastSubmission: false });
    }
    entry.event = 'login-form';
    entry.client = client;
    ctx.type = 'html';
    ctx.body = loginForm(details.uid, client);
    return undefined;
  }
  if (ctx.path === '/admin/sign-out' && ctx.method === 'POST') {
    // Test-only: the provider ends every session of an account (a server-side sign-out).
    const form = await readForm(ctx.req);
    entry.event = 'sign-out-everywhere';
    ctx.body = { destroyed: signOutEverywhere(form.get('account')) };
    return undefined;
  }
  if (ctx.path === '/' && ctx.method === 'GET') {
    const account = entry.account;
    ctx.type = 'html';
    ctx.body = page('Identity provider', `<p id="status">${account ? `Signed in as ${esc(account)}` : 'Not signed in'}</p>`);
    return undefined;
  }
  return next();
});

// What the provider's answer was, from its redirect (never the code itself).
function idpOutcome(entry, location) {
  if (!location) return;
  let target;
  try {
    target = new URL(location, `https://${IDP}`);
  } catch {
    return;
  }
  if (target.host === IDP && target.pathname.startsWith('/interaction/')) entry.event ??= 'interaction';
  else if (target.searchParams.has('code')) entry.event ??= 'code';
  else if (target.searchParams.has('error')) entry.event ??= `error:${target.searchParams.get('error')}`;
  else if (target.host !== IDP) entry.event ??= 'redirect';
}

// -- the relying parties -----------------------------------------------------------------
let PORT = 0;

// openid-client's back channel (discovery, token, JWKS) reaches idp.example here, over TLS
// checked against the throwaway certificate.
function idpFetch(url, options) {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const request = https.request({
      host: '127.0.0.1',
      port: PORT,
      servername: target.hostname,
      method: options.method,
      path: target.pathname + target.search,
      headers: { ...options.headers, host: target.host },
      ca: CERT,
      signal: options.signal,
    }, (response) => {
      const chunks = [];
      response.on('data', (c) => chunks.push(c));
      response.on('error', reject);
      response.on('end', () => {
        const headers = new Headers();
        for (const [name, value] of Object.entries(response.headers)) {
          for (const v of [].concat(value)) headers.append(name, v);
        }
        const empty = [204, 304].includes(response.statusCode);
        resolve(new Response(empty ? null : Buffer.concat(chunks), { status: response.statusCode, headers }));
      });
    });
    request.on('error', reject);
    const { body } = options;
    request.end(body === undefined || body === null ? undefined : (body instanceof URLSearchParams ? body.toString() : Buffer.from(body)));
  });
}

class RelyingParty {
  constructor(host) {
    this.host = host;
    this.name = SERVERS[host];
    this.sessions = new Map(); // session id -> { account, idToken, token }
    this.pending = new Map(); // transaction id -> { state, verifier, mode }
    this.config = null;
  }

  async discover() {
    this.config = await oidc.discovery(
      new URL(`https://${IDP}`),
      clientId(this.host),
      undefined,
      oidc.ClientSecretBasic(CLIENT_SECRETS[this.host]),
      { [oidc.customFetch]: idpFetch },
    );
    this.config[oidc.customFetch] = idpFetch;
  }

  // The account a request is served as: its session cookie, or the bearer token `/` keeps in
  // localStorage (what a single-page app's API calls carry).
  who(req) {
    const cookies = parseCookies(req.headers.cookie);
    const session = this.sessions.get(cookies[`${this.name}_session`]);
    if (session) return session;
    const bearer = (req.headers.authorization || '').match(/^Bearer (.+)$/);
    if (bearer) for (const s of this.sessions.values()) if (s.token === bearer[1]) return s;
    return null;
  }

  async handle(req, res, entry) {
    const url = new URL(req.url, `https://${this.host}`);
    const session = this.who(req);
    entry.account = session?.account ?? null;
    const title = this.name === 'app' ? 'App' : 'Wiki';
    switch (url.pathname) {
      case '/': {
        const store = session ? `<script>localStorage.setItem('token', ${JSON.stringify(session.token)});</script>` : '';
        return send(res, 200, 'text/html', page(title, `
          <p id="status">${session ? `Signed in as ${esc(session.account)}` : 'Not signed in'}</p>${store}
          <p><a id="sign-in" href="/login">Sign in</a> · <a href="/popup">Sign in with a popup</a> ·
          <a href="/silent">Silent sign-in</a> · <a id="sign-out" href="/logout">Sign out</a></p>`));
      }
      case '/api/me':
        return send(res, 200, 'application/json', JSON.stringify({ account: entry.account }));
      case '/login': {
        const mode = url.searchParams.get('popup') === '1' ? 'popup'
          : (url.searchParams.get('frame') === '1' || url.searchParams.get('prompt') === 'none') ? 'frame' : 'redirect';
        const verifier = oidc.randomPKCECodeVerifier();
        const state = oidc.randomState();
        const txn = random();
        this.pending.set(txn, { state, verifier, mode });
        const params = {
          redirect_uri: `https://${this.host}/callback`,
          scope: 'openid profile',
          code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
          code_challenge_method: 'S256',
          state,
        };
        if (url.searchParams.get('prompt') === 'none') params.prompt = 'none';
        entry.event = `login-${mode}`;
        entry.prompt = params.prompt ?? null;
        return send(res, 302, 'text/plain', '', {
          Location: oidc.buildAuthorizationUrl(this.config, params).href,
          'Set-Cookie': cookie(`${this.name}_txn`, txn, 600),
        });
      }
      case '/callback':
        return this.callback(req, res, url, entry);
      case '/popup':
        return send(res, 200, 'text/html', page(`${title}: sign in with a popup`, `
          <p id="status">${session ? `Signed in as ${esc(session.account)}` : 'Not signed in'}</p>
          <p id="result"></p>
          <button id="popup-sign-in" onclick="window.open('/login?popup=1', 'sign-in', 'width=480,height=640')">Sign in</button>
          <script>
            window.addEventListener('message', (e) => {
              if (e.origin !== location.origin) return;
              if (e.data.signedIn) location.reload();
              else document.getElementById('result').textContent = 'Sign-in failed: ' + e.data.error;
            });
          </script>`));
      case '/silent':
        return send(res, 200, 'text/html', page(`${title}: silent sign-in`, `
          <p id="status">${session ? `Signed in as ${esc(session.account)}` : 'Not signed in'}</p>
          <p id="result"></p>
          <script>
            window.addEventListener('message', (e) => {
              if (e.origin !== location.origin) return;
              if (e.data.signedIn) location.reload();
              else document.getElementById('result').textContent = 'Silent sign-in failed: ' + e.data.error;
            });
            ${session ? '' : `const frame = document.createElement('iframe');
            frame.id = 'silent-frame'; frame.hidden = true; frame.src = '/login?prompt=none';
            document.body.appendChild(frame);`}
          </script>`));
      case '/admin/sign-out': {
        // Test-only: the app ends every session of an account on its side (a server-side
        // expiry); the identity provider's session lives on.
        if (req.method !== 'POST') return send(res, 405, 'text/plain', '');
        const form = await readForm(req);
        let destroyed = 0;
        for (const [id, s] of [...this.sessions]) {
          if (s.account === form.get('account')) {
            this.sessions.delete(id);
            destroyed += 1;
          }
        }
        entry.event = 'sign-out-everywhere';
        return send(res, 200, 'application/json', JSON.stringify({ destroyed }));
      }
      case '/logout': {
        if (session) this.sessions.forEach((s, id) => { if (s === session) this.sessions.delete(id); });
        entry.event = 'logout';
        const end = oidc.buildEndSessionUrl(this.config, {
          post_logout_redirect_uri: `https://${this.host}/`,
          ...(session ? { id_token_hint: session.idToken } : {}),
        });
        return send(res, 302, 'text/plain', '', { Location: end.href, 'Set-Cookie': cookie(`${this.name}_session`, '', 0) });
      }
      default:
        return send(res, 404, 'text/html', page('Not found', ''));
    }
  }

  async callback(req, res, url, entry) {
    const cookies = parseCookies(req.headers.cookie);
    const txn = this.pending.get(cookies[`${this.name}_txn`]);
    this.pending.delete(cookies[`${this.name}_txn`]);
    const mode = txn?.mode ?? 'redirect';
    const reply = (message, headers = {}) => {
      // Popup: tell the opener and close; frame: tell the parent. Only the same origin.
      const post = mode === 'popup'
        ? `<script>if (window.opener) { window.opener.postMessage(${JSON.stringify(message)}, location.origin); window.close(); }</script>`
        : mode === 'frame' ? `<script>window.parent.postMessage(${JSON.stringify(message)}, location.origin);</script>` : '';
      return send(res, 200, 'text/html', page(message.signedIn ? 'Signed in' : 'Sign-in failed', `
        <p id="status">${message.signedIn ? `Signed in as ${esc(message.signedIn)}` : `Sign-in failed: ${esc(message.error)}`}</p>${post}`),
      headers);
    };
    if (!txn) {
      entry.event = 'sign-in-failed';
      return reply({ error: 'no_transaction' });
    }
    let tokens;
    try {
      tokens = await oidc.authorizationCodeGrant(this.config, url, { pkceCodeVerifier: txn.verifier, expectedState: txn.state });
    } catch (err) {
      entry.event = 'sign-in-failed';
      return reply({ error: err.error || err.code || 'failed' });
    }
    const account = tokens.claims().sub;
    const id = random();
    this.sessions.set(id, { account, idToken: tokens.id_token, token: random() });
    entry.account = account;
    entry.event = 'sign-in';
    // The transaction cookie goes on success only: a failed sign-in leaves it to expire, as
    // many applications do (the state a retry would overwrite anyway).
    const headers = { 'Set-Cookie': [cookie(`${this.name}_txn`, '', 0), cookie(`${this.name}_session`, id)] };
    if (mode === 'redirect') return send(res, 303, 'text/plain', '', { Location: '/', ...headers });
    return reply({ signedIn: account }, headers);
  }
}

const rps = Object.fromEntries(RPS.map((host) => [host, new RelyingParty(host)]));
const idpCallback = provider.callback();

function log(entry) {
  appendFileSync(opts.log, `${JSON.stringify(entry)}\n`);
}

const server = https.createServer({ cert: CERT, key: KEY }, (req, res) => {
  const host = (req.headers.host || '').split(':')[0].toLowerCase();
  const url = new URL(req.url, 'https://x');
  const entry = {
    server: SERVERS[host] ?? null,
    host,
    method: req.method,
    path: url.pathname,
    status: null,
    account: null,
    event: null,
    client: null,
    prompt: null,
    time: Date.now() / 1000,
  };
  if (host === IDP) {
    entry.account = sessionAccount(parseCookies(req.headers.cookie)._session);
    if (url.pathname === '/auth') {
      entry.client = url.searchParams.get('client_id');
      entry.prompt = url.searchParams.get('prompt');
    }
  }
  // Written as the answer leaves (its status line), so a test that saw the answer reads it.
  const writeHead = res.writeHead;
  res.writeHead = function writeHeadLogged(status, ...rest) {
    res.writeHead = writeHead;
    entry.status = status;
    if (host === IDP) {
      const headers = rest.find((r) => r && typeof r === 'object');
      idpOutcome(entry, headers?.location ?? headers?.Location ?? res.getHeader('location'));
    }
    log(entry);
    return writeHead.call(this, status, ...rest);
  };
  req.ssoEntry = entry;
  if (host === IDP) return idpCallback(req, res);
  const rp = rps[host];
  if (rp) {
    return rp.handle(req, res, entry).catch((err) => {
      console.error(err);
      if (!res.headersSent) send(res, 500, 'text/plain', 'error');
    });
  }
  if (host === NEWS) return send(res, 200, 'text/html', page('News', '<p id="status">Public news: nobody signs in here.</p>'));
  return send(res, 421, 'text/plain', 'unknown site');
});

server.listen(Number(opts.port), '127.0.0.1', async () => {
  PORT = server.address().port;
  try {
    for (const rp of Object.values(rps)) await rp.discover();
  } catch (err) {
    console.error(err);
    process.exit(1);
  }
  console.log(`ready ${PORT}`);
});

for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => server.close(() => process.exit(0)));
