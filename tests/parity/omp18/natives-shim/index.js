// oh-my-pi 18.3.4's bundle imports its native addon at 18.3.4, which npm does not have.
// 18.2.3 is the newest release published with its Linux addon, so this package hands on
// all of it. The bundle also imports nine names that 18.2.3 lacks; they belong to the
// shell's virtual file system, text prediction, Apple's on-device models and Mermaid
// diagrams, none of which opening, writing or reading a session touches. They are
// placeholders here: the four enums are empty, the rest refuse to run.
export * from "@oh-my-pi/pi-natives-real";

function unavailable(name) {
	const refuse = () => {
		throw new Error(`${name} is not in @oh-my-pi/pi-natives 18.2.3 (sessiond parity shim)`);
	};
	return new Proxy(function placeholder() {}, { apply: refuse, construct: refuse });
}

export const ShellFsFileType = Object.freeze({});
export const ShellFsMissing = Object.freeze({});
export const ShellFsOp = Object.freeze({});
export const ShellFsResolve = Object.freeze({});
export const TextPredictor = unavailable("TextPredictor");
export const appleFmAvailability = unavailable("appleFmAvailability");
export const appleFmCancel = unavailable("appleFmCancel");
export const appleFmGenerate = unavailable("appleFmGenerate");
export const renderMermaidAscii = unavailable("renderMermaidAscii");
