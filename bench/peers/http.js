// SPDX-License-Identifier: MIT
// http.js PORT - the HTTP peers of make bench-net, serving what
// examples/http_server.c serves: "Hello world\n" (12 bytes, text/plain) to
// every request, with keep-alive. On bun: Bun.serve; on node: the http
// module. Prints "NAME: listening on 127.0.0.1:PORT" once it listens.
'use strict';
const port = Number(process.argv[2]);
const body = 'Hello world\n';

if (typeof Bun !== 'undefined') {
	Bun.serve({
		port,
		hostname: '127.0.0.1',
		fetch() {
			return new Response(body, {
				headers: { 'Content-Type': 'text/plain' },
			});
		},
	});
	console.log(`bun: listening on 127.0.0.1:${port}`);
} else {
	const http = require('http');
	http.createServer((req, res) => {
		res.writeHead(200, {
			'Content-Type': 'text/plain',
			'Content-Length': '12',
		});
		res.end(body);
	}).listen(port, '127.0.0.1', () => {
		console.log(`node: listening on 127.0.0.1:${port}`);
	});
}
