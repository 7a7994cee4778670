// Lemo's approval gate for the pi coding agent.
//
// pi has no built-in tool approvals. Lemo loads this extension with
// `pi --mode rpc --no-extensions -e lemo-approvals.js`: before every tool
// call that can change something (anything but the read-only tools below)
// it asks for confirmation through pi's RPC extension UI sub-protocol (an
// `extension_ui_request` with method "confirm"), which Lemo bridges to a
// Lemo approval that a person answers. A denial, a cancelled dialog or an
// aborted turn blocks the tool call.
//
// The dialog's message ends with a marker line that names the tool and
// its call id, "[lemo-approval tool=<name> call=<toolCallId>]": Lemo uses
// it to recognise its own dialogs and to cancel the Lemo approval when pi
// abandons the dialog (the turn was aborted and the tool call ended).
// No timeout is set: Lemo answers every dialog.
//
// Plain JavaScript with no imports, so pi loads it without compiling
// TypeScript.

const READ_ONLY = new Set(["read", "grep", "find", "ls"]);
const MAX_DETAIL = 1500;

function clip(text) {
	return text.length > MAX_DETAIL ? `${text.slice(0, MAX_DETAIL)}… (${text.length} characters)` : text;
}

function detail(toolName, input) {
	if (input && typeof input === "object") {
		if (toolName === "bash" && typeof input.command === "string") {
			return `Command: ${clip(input.command)}`;
		}
		if (typeof input.path === "string") {
			return `Path: ${clip(input.path)}`;
		}
	}
	let json = "";
	try {
		json = JSON.stringify(input);
	} catch {
		json = String(input);
	}
	return `Arguments: ${clip(json ?? "")}`;
}

function token(text) {
	return String(text ?? "").replace(/[\s\]]/g, "_").slice(0, 200);
}

export default function lemoApprovals(pi) {
	pi.on("tool_call", async (event, ctx) => {
		if (READ_ONLY.has(event.toolName)) {
			return undefined;
		}
		if (!ctx.hasUI) {
			return { block: true, reason: "Lemo approvals need the RPC UI; the tool call was blocked" };
		}
		const message =
			`${detail(event.toolName, event.input)}\n\n` +
			`[lemo-approval tool=${token(event.toolName)} call=${token(event.toolCallId)}]`;
		const approved = await ctx.ui.confirm(`Allow tool: ${event.toolName}`, message, { signal: ctx.signal });
		if (!approved) {
			return { block: true, reason: "Denied by the Lemo approver" };
		}
		return undefined;
	});
}
