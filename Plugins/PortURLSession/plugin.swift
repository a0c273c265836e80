import Foundation
import PackagePlugin

/// Ports the target's `URLSessionSources/*.swift` (code written with Apple's
/// names) into the target's sources with `port-urlsession`, which applies
/// the porting table of the DocC article "Porting from URLSession" and
/// nothing else.
@main
struct PortURLSession: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) async throws -> [Command] {
        guard let target = target as? SourceModuleTarget else { return [] }
        let tool = try context.tool(named: "port-urlsession")
        let table = context.package.directoryURL.appendingPathComponent("Sources/URLLoading/URLLoading.docc/PortingFromURLSession.md")
        let folder = target.directoryURL.appendingPathComponent("URLSessionSources")
        let inputs = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { $0.hasSuffix(".swift") }
            .sorted()
        let outputFolder = context.pluginWorkDirectoryURL.appendingPathComponent("Ported")
        return inputs.map { name in
            let input = folder.appendingPathComponent(name)
            let output = outputFolder.appendingPathComponent(name)
            return .buildCommand(
                displayName: "Porting \(name) by the porting article's table",
                executable: tool.url,
                arguments: [table.path, input.path, output.path],
                inputFiles: [table, input],
                outputFiles: [output])
        }
    }
}
