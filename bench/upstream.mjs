// The upstream half of the benchmarks: the published @deepseek-ai packages on Node 24,
// reading (or, for `write`, writing) a real sessions root with their own JSONL persistence.
//
//   node upstream.mjs <upstream install dir> write|run   < request.json   > reply.json
//
// write: {root, compression, sessions: [{id, meta, batches: [[{type, time, data, surfaceOp?,
//         sourceEventSeqs?}]]}]} -- upstream's persistence writes the sessions, one flush (one zstd
//         frame) per batch, with Date.now() pinned to each event's time, so the bytes can be compared
//         with the Python generator's.
// run:   {root, compression, config, agent: {id, cwd}, ops: [{kind: 'list', query, repeat} |
//         {kind: 'prepare', references, content, repeat} | {kind: 'check', text, repeat}]}
//         -> {startupMs, ops: [{ms: [...], summary}], maxRssKb}
import { performance } from 'node:perf_hooks'
import { loadUpstream } from '../tests/conformance/oracle/upstream.mjs'

const [installDir, mode] = process.argv.slice(2)
const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const request = JSON.parse(Buffer.concat(chunks).toString('utf8'))
const up = await loadUpstream(installDir)

/** The search half of SessionQueryEngine is abstract; upstream's own spec stubs it this way. */
class BenchQueryEngine extends up.SessionQueryEngine {
  searchSessions() {
    return Promise.resolve({ items: [] })
  }

  searchEvents(req) {
    return this.readSurface(req.sessionId).then((surface) => ({ session: surface.session, items: [] }))
  }
}

async function start(plugins) {
  const ctx = new up.Context()
  const fibers = []
  for (const [plugin, config] of plugins) {
    const fiber = ctx.plugin(plugin, config)
    fibers.push(fiber)
    await fiber
  }
  return { ctx, fibers }
}

async function stop(fibers) {
  for (const fiber of [...fibers].reverse()) await fiber.dispose()
}

async function write({ root, compression, sessions }) {
  const realNow = Date.now
  let pinned
  Date.now = () => pinned ?? realNow()
  const { ctx, fibers } = await start([
    [up.SessionStore, undefined],
    [up.JsonlSessionPersistence, { root, compression }],
  ])
  try {
    for (const spec of sessions) {
      const session = ctx.sessions.create(spec.id, { meta: spec.meta })
      for (const batch of spec.batches) {
        for (const event of batch) {
          pinned = event.time
          const options = {}
          if (event.surfaceOp !== undefined) options.surfaceOp = event.surfaceOp
          if (event.sourceEventSeqs !== undefined) options.sourceEventSeqs = event.sourceEventSeqs
          session.append(event.type, event.data, options)
        }
        await ctx.sessions.flush(session)
      }
    }
  } finally {
    await stop(fibers)
    Date.now = realNow
  }
  return { written: sessions.length }
}

function agentOf(agent) {
  return { id: agent.id, session: { header: agent.cwd ? { cwd: agent.cwd } : {} } }
}

async function runOp(resolver, agent, op) {
  if (op.kind === 'list') {
    const found = await resolver.listCandidates(agent, op.query)
    return { count: found.length, candidates: found.map((c) => [c.sessionId, c.label]) }
  }
  if (op.kind === 'prepare' || op.kind === 'check') {
    let content = op.content
    let references = op.references
    if (op.kind === 'check') {
      // What dsh does with a message before it is sent: parse the mentions, then prepare.
      const parsed = up.parseSessionReferenceText(op.text)
      content = [{ type: 'text', text: parsed.text }]
      references = parsed.references
    }
    const prepared = await resolver.prepare(agent, content, references)
    const text = prepared.additionalContext?.content[0].text ?? ''
    return { textBytes: Buffer.byteLength(text), text }
  }
  throw new Error(`unknown op ${op.kind}`)
}

async function run({ root, compression, config, agent, ops }) {
  const began = performance.now()
  const { ctx, fibers } = await start([
    [up.SessionStore, undefined],
    [up.JsonlSessionPersistence, { root, compression }],
    [BenchQueryEngine, undefined],
    [up.SessionReferenceResolver, config ?? {}],
  ])
  const startupMs = performance.now() - began
  const results = []
  try {
    for (const op of ops) {
      const ms = []
      let summary
      for (let i = 0; i < (op.repeat ?? 1); i++) {
        const t0 = performance.now()
        try {
          summary = await runOp(ctx.sessionReferenceResolver, agentOf(agent), op)
        } catch (error) {
          summary = { error: `${error?.name}: ${error?.message}` }
        }
        ms.push(performance.now() - t0)
      }
      results.push({ ms, summary })
    }
  } finally {
    await stop(fibers)
  }
  return { startupMs, ops: results, maxRssKb: process.resourceUsage().maxRSS }
}

const reply = mode === 'write' ? await write(request) : await run(request)
process.stdout.write(JSON.stringify(reply))
