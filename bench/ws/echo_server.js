// bench/ws.sh: the Node.js peer, an echo server on the `ws` package (npm), as its README shows.
const { WebSocketServer } = require('ws');
const port = Number(process.argv[2]);
const wss = new WebSocketServer({ host: '127.0.0.1', port, perMessageDeflate: false });
wss.on('connection', (ws) => {
  ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
});
wss.on('listening', () => console.log('listening on ' + port));
