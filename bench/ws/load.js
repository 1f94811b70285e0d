// bench/ws.sh's load generator (`ws` package).
//   node load.js echo URL CONNS WINDOW SECONDS SIZE   -> prints "messages N"
//     each connection keeps WINDOW messages of SIZE bytes in flight (a new one
//     for each echo), for SECONDS once all are open.
//   node load.js idle URL CONNS                        -> prints "open N", holds until killed
const WebSocket = require('ws');
const [mode, url, conns] = [process.argv[2], process.argv[3], Number(process.argv[4])];
let open = 0;
const sockets = [];
function connectAll(onAll) {
  let i = 0;
  const inflight = Number(process.env.INFLIGHT || 200);
  const batch = () => { // at most INFLIGHT handshakes at a time
    while (i < conns && i - open < inflight) {
      i++;
      const ws = new WebSocket(url, { perMessageDeflate: false });
      ws.on('open', () => { sockets.push(ws); if (++open === conns) onAll(); else batch(); });
      ws.on('error', (e) => { console.error('error ' + e.message); process.exit(1); });
    }
  };
  batch();
}
if (mode === 'idle') {
  connectAll(() => console.log('open ' + open));
} else {
  const [windowSize, seconds, size] = process.argv.slice(5).map(Number);
  const msg = 'x'.repeat(size);
  let count = 0, running = true;
  connectAll(() => {
    for (const ws of sockets) {
      ws.on('message', () => { count++; if (running) ws.send(msg); });
      for (let k = 0; k < windowSize; k++) ws.send(msg);
    }
    setTimeout(() => {
      running = false;
      console.log('messages ' + count);
      for (const ws of sockets) ws.terminate();
      process.exit(0);
    }, seconds * 1000);
  });
}
