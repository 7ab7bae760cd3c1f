// Loads the published upstream packages from the scratch install made by
// scripts/install-upstream. This file lives in the repository, outside that
// folder's node_modules, and ESM ignores NODE_PATH, so every bare specifier is
// resolved with a require() anchored in the install folder and then imported by
// absolute file URL. Packages imported that way resolve their own dependencies
// from their real location, so the oracle shares one module instance of cordis,
// dsh-session, ... with upstream itself.
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'

/**
 * @param {string} installDir - the folder printed by scripts/install-upstream.
 */
export async function loadUpstream(installDir) {
  const require = createRequire(join(installDir, 'package.json'))
  const load = (specifier) => import(pathToFileURL(require.resolve(specifier)).href)
  const packageRoot = (name) => dirname(require.resolve(`${name}/package.json`))
  // Internal modules are not in the package's `exports`, so they are imported by
  // path; they are the very files the bundled entry point was built from.
  const internal = (name, path) => import(pathToFileURL(join(packageRoot(name), path)).href)

  const [reference, projection, serialization, cordis, session, query, persistence, llm, compaction] =
    await Promise.all([
      load('@deepseek-ai/dsh-session-reference'),
      internal('@deepseek-ai/dsh-session-reference', 'lib/types/projection.js'),
      internal('@deepseek-ai/dsh-session-reference', 'lib/types/serialization.js'),
      load('@deepseek-ai/cordis'),
      load('@deepseek-ai/dsh-session'),
      load('@deepseek-ai/dsh-session-query'),
      load('@deepseek-ai/dsh-session-persistence-jsonl'),
      load('@deepseek-ai/dsh-llm'),
      load('@deepseek-ai/dsh-compaction'),
    ])
  const versions = Object.fromEntries(
    [
      '@deepseek-ai/dsh-session-reference',
      '@deepseek-ai/dsh-session',
      '@deepseek-ai/dsh-session-query',
      '@deepseek-ai/dsh-session-persistence-jsonl',
      '@deepseek-ai/cordis',
    ].map((name) => [name, require(`${name}/package.json`).version]),
  )
  return {
    versions,
    encodeSessionReferenceUri: reference.encodeSessionReferenceUri,
    decodeSessionReferenceUri: reference.decodeSessionReferenceUri,
    formatSessionReferenceMention: reference.formatSessionReferenceMention,
    parseSessionReferenceText: reference.parseSessionReferenceText,
    SessionReferenceResolver: reference.SessionReferenceResolver,
    retainReferencedSession: projection.retainReferencedSession,
    stringifyTagSafeJson: serialization.stringifyTagSafeJson,
    Context: cordis.Context,
    SessionStore: session.SessionStore,
    SessionQueryEngine: query.SessionQueryEngine,
    JsonlSessionPersistence: persistence.JsonlSessionPersistence,
    createUserMessage: llm.createUserMessage,
    compactCheckpointSource: compaction.compactCheckpointSource,
  }
}
