/**
 * What `--dev` prints once it listens (README "Quick start"): two session tokens to paste into a
 * shell, and a call to try with them. The call can be pasted as often as one likes: each paste
 * makes a new callId and uses it in a new operationId, so it creates a new call (201), while the
 * request line alone, run again, replays its first outcome (docs/api.md "Idempotency"). It uses
 * curl when the machine has it, and Node.js otherwise (a fresh Debian has no curl).
 */
export function devBanner(o: { baseUrl: string; alice: string; bob: string; curl: boolean; demo: boolean }): string {
  const body = `'{"callId":"'$ID'","calleeUserId":"bob","operationId":"op-'$ID'"}'`;
  const request = o.curl
    ? [
        `  curl -s -w '\\nHTTP %{http_code}\\n' -X POST ${o.baseUrl}/v1/calls -H "authorization: Bearer $ALICE" \\`,
        `    -H 'content-type: application/json' -d ${body}`,
      ]
    : [
        `  node -e 'fetch(process.argv[1], { method: "POST", headers: { authorization: "Bearer " + process.argv[2], "content-type": "application/json" }, body: process.argv[3] })` +
          `.then(async (r) => console.log(await r.text() + "\\nHTTP " + r.status))' \\`,
        `    ${o.baseUrl}/v1/calls "$ALICE" ${body}`,
      ];
  return [
    '',
    // Above the tokens, apart from the lines to paste (a shell must never run it).
    o.demo
      ? `Softphone: ${o.baseUrl}/demo/ (open it twice, sign in as alice and bob)`
      : `Softphone: not served here; npm run demo serves it at ${o.baseUrl}/demo/`,
    '',
    'Dev tokens (24 h):',
    `  ALICE=${o.alice}`,
    `  BOB=${o.bob}`,
    'Try: paste the tokens into a shell, then these lines (again for another call):',
    `  ID=$(node -p 'crypto.randomUUID()')`,
    ...request,
    '',
    '',
  ].join('\n');
}
