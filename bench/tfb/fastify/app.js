// The Fastify peer of bench/tfb: the TechEmpower test types and the seed's
// 12 Redis routes, written as a Fastify user would (postgres.js, ioredis,
// a template literal with an escaping function for the one HTML page).
// One process, one thread. Environment: PORT, PGPORT, REDIS_PORT, POOL.
'use strict'
const fastify = require('fastify')({ logger: false })
const postgres = require('postgres')
const Redis = require('ioredis')

const POOL = Number(process.env.POOL || 16)
const sql = postgres({
  host: '127.0.0.1', port: Number(process.env.PGPORT || 5432), user: 'postgres',
  database: 'postgres', max: POOL
})
const redis = new Redis({ host: '127.0.0.1', port: Number(process.env.REDIS_PORT || 6379) })
const ROWS = 10000
const rnd = () => 1 + Math.floor(Math.random() * ROWS)

// queries/count: an integer clamped to 1..500, anything else 1.
function count (v) {
  const n = /^-?[0-9]+$/.test(v || '') ? parseInt(v, 10) : 1
  return n < 1 ? 1 : n > 500 ? 500 : n
}

fastify.addHook('onRequest', (req, reply, done) => { reply.header('Server', 'fastify'); done() })

fastify.get('/json', (req, reply) => { reply.send({ message: 'Hello, World!' }) })

fastify.get('/plaintext', (req, reply) => {
  reply.header('Content-Type', 'text/plain; charset=utf-8').send('Hello, World!')
})

const world = async id => (await sql`SELECT id, randomnumber AS "randomNumber" FROM world WHERE id = ${id}`)[0]

fastify.get('/db', async () => world(rnd()))

const worlds = n => Promise.all(Array.from({ length: n }, () => world(rnd())))

fastify.get('/queries', async req => worlds(count(req.query.queries)))

fastify.get('/updates', async req => {
  const rows = await worlds(count(req.query.queries))
  const fresh = new Map()
  for (const w of rows) {
    if (!fresh.has(w.id)) fresh.set(w.id, rnd())
    w.randomNumber = fresh.get(w.id)
  }
  const ids = [...fresh.keys()].sort((a, b) => a - b)
  const nums = ids.map(id => fresh.get(id))
  await sql`UPDATE world SET randomnumber = v.r
    FROM unnest(${sql.array(ids)}::int[], ${sql.array(nums)}::int[]) AS v(id, r) WHERE world.id = v.id`
  return rows
})

const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }
const escape = s => String(s).replace(/[&<>"']/g, c => ESC[c])

fastify.get('/fortunes', async (req, reply) => {
  const rows = [...await sql`SELECT id, message FROM fortune`]
  rows.push({ id: 0, message: 'Additional fortune added at request time.' })
  rows.sort((a, b) => (a.message < b.message ? -1 : a.message > b.message ? 1 : 0))
  reply.header('Content-Type', 'text/html; charset=utf-8')
  return '<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>' +
    '<tr><th>id</th><th>message</th></tr>' +
    rows.map(f => `<tr><td>${f.id}</td><td>${escape(f.message)}</td></tr>`).join('') +
    '</table></body></html>'
})

const cache = new Map()
fastify.get('/cached-queries', async req => {
  const n = count(req.query.count)
  return Array.from({ length: n }, () => cache.get(rnd()))
})

function seedRoute (path, key, field, empty) {
  fastify.get(path, async () => ({ name: await redis.get(key), [field]: empty }))
}
seedRoute('/api/users', 'tfb:users', 'users', [])
seedRoute('/api/users/', 'tfb:user', 'user', {})
seedRoute('/api/orders', 'tfb:orders', 'orders', [])
seedRoute('/api/orders/', 'tfb:order', 'order', {})
for (let i = 0; i < 8; i++) seedRoute('/api/items/' + i, 'tfb:item:' + i, 'item', {})

async function main () {
  for (const w of await sql`SELECT id, randomnumber AS "randomNumber" FROM cachedworld`) cache.set(w.id, w)
  await fastify.listen({ host: '127.0.0.1', port: Number(process.env.PORT || 8080) })
}
main().catch(e => { console.error(e); process.exit(1) })
