// A command's call and result (`commands__exec`) as a person reads them: the command
// line instead of its JSON arguments, and how it ended, how long it took and where,
// then its output, instead of the raw JSON. It reads the result as `shiitake chat`
// does (crates/shiitake/src/render/command_result.rs). The text is the tool's own:
// the caller puts it in as text nodes.

const EXEC = "commands__exec";

/** `$ make test` for an exec call's arguments; null for any other call. */
export function commandLine(toolName, args) {
  if (toolName !== EXEC || !args) return null;
  if (typeof args.command === "string") return `$ ${args.command}`;
  if (Array.isArray(args.argv)) return `$ ${args.argv.join(" ")}`;
  return null;
}

/**
 * What an exec result's text says: `{summary, failed, streams: [{name, text}]}` (its
 * ending, whether it ended badly, and each stream with what was cut counted), or null
 * when the text is not the result of a command run to its end or started as a job.
 */
export function commandResult(toolName, text) {
  if (toolName !== EXEC) return null;
  let result;
  try {
    result = JSON.parse(text);
  } catch {
    return null;
  }
  if (!result || typeof result !== "object" || typeof result.computer !== "string") return null;
  if (typeof result.job === "string") {
    const command = typeof result.command === "string" ? `: ${result.command}` : "";
    return { summary: `job ${result.job} started on ${result.computer}${command}`, failed: false, streams: [] };
  }
  const exit = result.exit || {};
  let ended;
  if (typeof exit.code === "number") ended = `exit ${exit.code}`;
  else if (typeof exit.signal === "number") ended = `killed by signal ${exit.signal}`;
  else return null;
  const stopped =
    result.stopped === "timedOut" ? ", its time limit passed" : result.stopped === "cancelled" ? ", cancelled" : "";
  const streams = [];
  for (const name of ["stdout", "stderr"]) {
    const captured = result[name];
    if (!captured) continue;
    let shown = captured.head || "";
    if (captured.cutBytes > 0) shown += `\n[${captured.cutBytes} bytes cut]\n${captured.tail || ""}`;
    if (shown) streams.push({ name, text: shown });
  }
  const ms = typeof result.durationMs === "number" ? result.durationMs : 0;
  return {
    summary: `${ended} in ${ms} ms on ${result.computer}${stopped}`,
    failed: exit.code !== 0,
    streams,
  };
}
