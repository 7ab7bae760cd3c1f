// The differential-test oracle: a Node 24 process that answers JSON-line
// requests by calling the REAL published upstream code.
//
//   node oracle.mjs <upstream install dir>
//
// Request:  {"id": n, "op": "...", "args": {...}}            one per line
// Response: {"id": n, "ok": true, "result": ...}
//        or {"id": n, "ok": false, "error": {"name", "code", "message"}}
// The op "batch" ({"requests": [{op, args}, ...]}) answers many cases in one
// round trip with a list of {ok, result | error}.
//
// Strings cross the boundary losslessly: JSON.stringify writes a lone surrogate
// as a \udXXX escape (Python's json.loads turns it back into that code point)
// and the Python side sends ASCII-only JSON whose \uXXXX escapes JSON.parse
// restores to the same UTF-16 code units.
import { createHash } from 'node:crypto'
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { createInterface } from 'node:readline'
import { loadUpstream } from './upstream.mjs'

const installDir = process.argv[2] ?? process.env.DSH_SR_UPSTREAM_DIR
if (!installDir) {
  process.stderr.write('usage: node oracle.mjs <upstream install dir>\n')
  process.exit(2)
}
const up = await loadUpstream(installDir)

// A stray rejection inside upstream must not take the whole differential run down.
process.on('unhandledRejection', (reason) => {
  process.stderr.write(`oracle: unhandled rejection: ${reason?.stack ?? String(reason)}\n`)
})

/** The search half of SessionQueryEngine is abstract; upstream's own spec stubs it the same way. */
class OracleSessionQueryEngine extends up.SessionQueryEngine {
  searchSessions() {
    return Promise.resolve({ items: [] })
  }

  searchEvents(request) {
    return this.readSurface(request.sessionId).then((surface) => ({ session: surface.session, items: [] }))
  }
}

function errorShape(error) {
  if (error instanceof Error) {
    return { name: error.name, code: typeof error.code === 'string' ? error.code : null, message: error.message }
  }
  return { name: null, code: null, message: String(error) }
}

/** A JSON-safe result: `undefined` (upstream's "no value") becomes null. */
const orNull = (value) => (value === undefined ? null : value)

// ---------------------------------------------------------------- contexts

/** Load plugins in order; returns the context and the fibers to dispose in reverse. */
async function startContext(plugins) {
  const ctx = new up.Context()
  const fibers = []
  try {
    for (const [plugin, config] of plugins) {
      const fiber = ctx.plugin(plugin, config)
      fibers.push(fiber)
      await fiber
    }
  } catch (error) {
    await stopContext(fibers)
    throw error
  }
  return { ctx, fibers }
}

async function stopContext(fibers) {
  for (const fiber of [...fibers].reverse()) await fiber.dispose()
}

function appendSessions(ctx, sessions) {
  for (const spec of sessions) {
    const session = ctx.sessions.create(spec.id, { meta: spec.meta })
    for (const [index, event] of (spec.events ?? []).entries()) {
      const options = {}
      if (event.surfaceOp !== undefined) options.surfaceOp = event.surfaceOp
      if (event.sourceEventSeqs !== undefined) options.sourceEventSeqs = event.sourceEventSeqs
      try {
        session.append(event.type, event.data, options)
      } catch (error) {
        const wrapped = new Error(`setup: session ${JSON.stringify(spec.id)} event ${index}: ${error.message}`)
        wrapped.name = 'OracleSetupError'
        throw wrapped
      }
    }
  }
}

/** The agent a message is written for; only `id` and `session.header.cwd` are read upstream. */
function agentOf(spec) {
  const header = spec.cwd === undefined || spec.cwd === null ? {} : { cwd: spec.cwd }
  return { id: spec.id, session: { header } }
}

async function runResolverOps(resolver, ops) {
  const results = []
  for (const op of ops) {
    try {
      results.push({ ok: true, result: await runResolverOp(resolver, op) })
    } catch (error) {
      results.push({ ok: false, error: errorShape(error) })
    }
  }
  return results
}

async function runResolverOp(resolver, op) {
  const agent = agentOf(op.agent)
  switch (op.kind) {
    case 'list': {
      const args = [agent]
      if ('limit' in op) args.push(op.query ?? undefined, op.limit)
      else if ('query' in op) args.push(op.query)
      return resolver.listCandidates(...args)
    }
    case 'candidates':
      // The remote face: always the configured limit, plus each candidate's mention.
      return resolver.remoteExportCandidates(agent, op.query ?? undefined, undefined)
    case 'prepare': {
      const prepared = await resolver.prepare(agent, op.content, op.references)
      const context = prepared.additionalContext
      return {
        content: prepared.content,
        hasAdditionalContext: Object.hasOwn(prepared, 'additionalContext'),
        additionalContext:
          context === undefined
            ? null
            : {
                keys: Object.keys(context),
                role: context.role,
                source: context.source,
                contentLength: context.content.length,
                text: context.content[0].text,
              },
      }
    }
    default:
      throw new Error(`unknown resolver op ${JSON.stringify(op.kind)}`)
  }
}

function resolverPlugins(config, persistence) {
  return [
    [up.SessionStore, undefined],
    ...(persistence === undefined ? [] : [[up.JsonlSessionPersistence, persistence]]),
    [OracleSessionQueryEngine, undefined],
    [up.SessionReferenceResolver, config ?? {}],
  ]
}

// ---------------------------------------------------------------- stores

async function walk(root) {
  const files = []
  const visit = async (dir) => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) await visit(path)
      else files.push(path)
    }
  }
  await visit(root)
  return files.sort()
}

/** Relative path and SHA-256 of every file: proves a read left the root untouched. */
async function digestTree(root) {
  const out = []
  for (const path of await walk(root)) {
    out.push([relative(root, path), createHash('sha256').update(await readFile(path)).digest('hex')])
  }
  return out
}

async function writeStore({ root, compression, packChunks, sessions }) {
  const { ctx, fibers } = await startContext([
    [up.SessionStore, undefined],
    [up.JsonlSessionPersistence, { root, compression, packChunks }],
  ])
  try {
    appendSessions(ctx, sessions)
    for (const session of ctx.sessions.list()) await ctx.sessions.flush(session)
  } finally {
    await stopContext(fibers)
  }
  return digestTree(root)
}

// ---------------------------------------------------------------- ops

const ops = {
  versions: () => up.versions,
  /** Transport check: the string as JS holds it, as UTF-16 code units, and back. */
  echo: ({ value }) => ({ value, codeUnits: Array.from({ length: value.length }, (_, i) => value.charCodeAt(i)) }),
  encode: ({ id }) => up.encodeSessionReferenceUri(id),
  decode: ({ uri }) => up.decodeSessionReferenceUri(uri),
  format: ({ reference }) => up.formatSessionReferenceMention(reference),
  parse: ({ text }) => up.parseSessionReferenceText(text),
  tag_safe: (args) => up.stringifyTagSafeJson(Object.hasOwn(args, 'value') ? args.value : undefined),
  retain: ({ snapshot, label, maxBytes }) => orNull(up.retainReferencedSession(snapshot, label, maxBytes)),

  /** The resolver constructor's own config validation (not cordis's schema check). */
  config: ({ config }) => {
    const ctx = new up.Context()
    const resolver = new up.SessionReferenceResolver(ctx, config)
    return resolver.config
  },

  /** Resolver ops over live, in-memory sessions (no persistence mounted). */
  memory: async ({ sessions, config, ops: resolverOps }) => {
    const { ctx, fibers } = await startContext(resolverPlugins(config))
    try {
      appendSessions(ctx, sessions)
      return await runResolverOps(ctx.sessionReferenceResolver, resolverOps)
    } finally {
      await stopContext(fibers)
    }
  },

  /** Upstream's JSONL persistence writes `sessions` as a real sessions root. */
  write_store: async ({ root, compression, packChunks, sessions }) => {
    // A given root must already exist: a request whose caller gave up (and removed the
    // folder) must not bring it back.
    if (root !== undefined && !(await stat(root)).isDirectory()) throw new Error(`${root} is not a directory`)
    const target = root ?? (await mkdtemp(join(tmpdir(), 'dsh-sr-oracle-')))
    return { root: target, files: await writeStore({ root: target, compression, packChunks, sessions }) }
  },

  /** Resolver ops over a sessions root read through upstream's persistence. */
  disk: async ({ root, compression, config, ops: resolverOps }) => {
    const before = await digestTree(root)
    const { ctx, fibers } = await startContext(resolverPlugins(config, { root, compression }))
    let results
    try {
      results = await runResolverOps(ctx.sessionReferenceResolver, resolverOps)
    } finally {
      await stopContext(fibers)
    }
    const after = await digestTree(root)
    return { results, rootUnchanged: JSON.stringify(before) === JSON.stringify(after) }
  },

  /**
   * One store case in one round trip: write the root, run the ops over the same
   * sessions in memory and over the written root.
   */
  store_case: async ({ root, compression, packChunks, sessions, config, ops: resolverOps }) => {
    const written = await ops.write_store({ root, compression, packChunks, sessions })
    const memory = await ops.memory({ sessions, config, ops: resolverOps })
    const disk = await ops.disk({ root: written.root, compression, config, ops: resolverOps })
    return { root: written.root, files: written.files, memory, disk: disk.results, rootUnchanged: disk.rootUnchanged }
  },

  remove_tree: async ({ root }) => {
    await rm(root, { recursive: true, force: true })
    return null
  },

  batch: async ({ requests }) => {
    const results = []
    for (const request of requests) results.push(await answer(request))
    return results
  },
}

async function answer({ op, args }) {
  const handler = Object.hasOwn(ops, op) ? ops[op] : undefined
  if (handler === undefined) return { ok: false, error: { name: 'OracleError', code: null, message: `unknown op ${op}` } }
  try {
    return { ok: true, result: await handler(args ?? {}) }
  } catch (error) {
    return { ok: false, error: errorShape(error) }
  }
}

// ---------------------------------------------------------------- loop

// Requests are answered strictly in order; the Python side waits for each reply.
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity })
for await (const line of lines) {
  if (line.trim() === '') continue
  let request
  try {
    request = JSON.parse(line)
  } catch (error) {
    process.stdout.write(`${JSON.stringify({ id: null, ok: false, error: errorShape(error) })}\n`)
    continue
  }
  const reply = await answer(request)
  process.stdout.write(`${JSON.stringify({ id: request.id ?? null, ...reply })}\n`)
}
